"""The network policy of payload fetches: which addresses a fetch may connect to (SPEC section 5).

By default a fetch refuses every address that isn't public unicast: loopback, private (RFC 1918,
shared address space, unique local), link-local, multicast, unspecified, reserved (documentation,
benchmarking, IETF protocol assignments, class E, broadcast, anything outside IPv6 global unicast
``2000::/3``) and cloud metadata endpoints. A host widens it with an allowlist of addresses,
networks (CIDR) and host names.

Where the check happens, and why there is no DNS-rebinding window: see
:mod:`._policy_backend`, the one place a fetch opens a socket.

Choices where SPEC is silent:

- A host whose addresses are partly refused connects only to the permitted ones; it is refused
  when none is permitted. A refused address is never connected to.
- An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) is judged as its IPv4 address, and a NAT64
  address (``64:ff9b::/96``) by the IPv4 address it embeds. 6to4 and Teredo are reserved.
- The tables are written out here from the IANA special-purpose registries rather than taken from
  :mod:`ipaddress`'s ``is_private``/``is_global``, whose answers differ between Python versions.
- An allowlisted network or host name permits everything it covers except a cloud metadata
  address, which is permitted only by naming that exact address (``allow=["0.0.0.0/0"]`` still
  refuses ``169.254.169.254``).
- Host names in the allowlist match the URL's host exactly (case-insensitive, IDNA-encoded); they
  permit every address that name resolves to, as the host asked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

from ._exceptions import AddressRefused

__all__ = ["AddressRefused", "IPAddress", "NetworkPolicy"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA: Final = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean... instance metadata
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "168.63.129.16",  # Azure wire server (a public address)
        "100.100.100.200",  # Alibaba Cloud metadata
        "192.0.0.192",  # Oracle Cloud metadata
        "fd00:ec2::254",  # AWS instance metadata over IPv6
        "fd00:ec2::23",  # AWS IPv6 DNS
    )
)

_LOOPBACK: Final = "a loopback address"
_PRIVATE: Final = "a private address"
_LINK_LOCAL: Final = "a link-local address"
_MULTICAST: Final = "a multicast address"
_UNSPECIFIED: Final = "an unspecified address"
_RESERVED: Final = "a reserved address"
_METADATA_LABEL: Final = "a cloud metadata address"

_V4_TABLE: Final = tuple(
    (ipaddress.IPv4Network(net), label)
    for net, label in (
        ("0.0.0.0/8", _UNSPECIFIED),
        ("10.0.0.0/8", _PRIVATE),
        ("100.64.0.0/10", _PRIVATE),  # shared address space (carrier-grade NAT)
        ("127.0.0.0/8", _LOOPBACK),
        ("169.254.0.0/16", _LINK_LOCAL),
        ("172.16.0.0/12", _PRIVATE),
        ("192.0.0.0/24", _RESERVED),  # IETF protocol assignments
        ("192.0.2.0/24", _RESERVED),  # documentation
        ("192.88.99.0/24", _RESERVED),  # 6to4 relay anycast (deprecated)
        ("192.168.0.0/16", _PRIVATE),
        ("198.18.0.0/15", _RESERVED),  # benchmarking
        ("198.51.100.0/24", _RESERVED),  # documentation
        ("203.0.113.0/24", _RESERVED),  # documentation
        ("224.0.0.0/4", _MULTICAST),
        ("240.0.0.0/4", _RESERVED),  # class E and the broadcast address
    )
)

_V6_TABLE: Final = tuple(
    (ipaddress.IPv6Network(net), label)
    for net, label in (
        ("::/128", _UNSPECIFIED),
        ("::1/128", _LOOPBACK),
        ("64:ff9b:1::/48", _PRIVATE),  # local-use NAT64
        ("100::/64", _RESERVED),  # discard-only
        ("2001::/23", _RESERVED),  # IETF protocol assignments, Teredo included
        ("2001:db8::/32", _RESERVED),  # documentation
        ("2002::/16", _RESERVED),  # 6to4
        ("3fff::/20", _RESERVED),  # documentation
        ("5f00::/16", _RESERVED),  # SRv6 SIDs
        ("fc00::/7", _PRIVATE),  # unique local
        ("fe80::/10", _LINK_LOCAL),
        ("fec0::/10", _PRIVATE),  # site-local (deprecated)
        ("ff00::/8", _MULTICAST),
    )
)
_V6_GLOBAL_UNICAST: Final = ipaddress.IPv6Network("2000::/3")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")

_HOSTNAME: Final = re.compile(r"[a-z0-9_][a-z0-9_-]{0,62}(\.[a-z0-9_][a-z0-9_-]{0,62})*")


def _judged(address: IPAddress) -> IPAddress:
    """The address whose kind decides: an IPv4-mapped address is judged as its IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return mapped
        # A scope id ("%eth0") doesn't change what kind of address this is.
        if address.scope_id is not None:
            return ipaddress.IPv6Address(address.packed)
    return address


def address_label(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is (``"a private address"``), or ``None``.

    Pure, total, and independent of the Python version's :mod:`ipaddress` tables.
    """
    address = _judged(address)
    if address in _METADATA:
        return _METADATA_LABEL
    if isinstance(address, ipaddress.IPv4Address):
        for network, label in _V4_TABLE:
            if address in network:
                return label
        return None
    if address in _NAT64:
        return address_label(ipaddress.IPv4Address(address.packed[-4:]))
    for network6, label in _V6_TABLE:
        if address in network6:
            return label
    if address not in _V6_GLOBAL_UNICAST:
        return _RESERVED
    return None


def _allowed_host(entry: str) -> str | None:
    """An allowlist entry as the host name a URL carries (IDNA, lower case), or ``None``."""
    text = entry.lower().rstrip(".")
    if not text.isascii():
        import httpx  # an allowlist entry that isn't ASCII: rare, and read once

        try:
            text = httpx.URL(f"http://{text}/").raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeError):
            return None
    return text if _HOSTNAME.fullmatch(text) else None


class NetworkPolicy:
    """Which addresses a fetch may connect to: public unicast, plus what ``allow`` lists.

    Args:
        allow: entries each of which is an IP address (``"127.0.0.1"``, ``"::1"``), a network in
            CIDR notation (``"10.0.0.0/8"``) or a host name (``"files.internal"``).

    Raises:
        ValueError: an entry is none of these.
    """

    def __init__(self, allow: Iterable[str] = ()) -> None:
        if isinstance(allow, str):
            raise ValueError("allow takes a list of entries, not one string")
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in allow:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"not an address, network or host name: {entry!r}")
            text = entry.strip()
            try:
                networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            host = _allowed_host(text)
            if host is None:
                raise ValueError(f"not an address, network or host name: {entry!r}")
            hosts.add(host)
        self._networks = tuple(networks)
        self._hosts = frozenset(hosts)

    def __repr__(self) -> str:
        entries = [str(n) for n in self._networks] + sorted(self._hosts)
        return f"NetworkPolicy(allow={entries!r})"

    def refusal(self, host: str, address: IPAddress) -> str | None:
        """Why a connection to ``address`` (reached as ``host``) is refused, or ``None``.

        The answer is a label such as ``"a loopback address"``. Pure.
        """
        label = address_label(address)
        if label is None:
            return None
        judged = _judged(address)
        if label == _METADATA_LABEL:
            exact = any(
                n.num_addresses == 1 and n.network_address == judged for n in self._networks
            )
            return None if exact else label
        if host.lower().rstrip(".") in self._hosts:
            return None
        if any(judged.version == n.version and judged in n for n in self._networks):
            return None
        return label
