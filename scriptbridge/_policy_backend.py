"""The network policy at the socket: :class:`PolicyBackend`, the one place a fetch connects.

It is an ``httpcore`` network backend. Each connection resolves its host **once**, checks every
address the resolver returned, and connects to a checked address given as an IP literal, so nothing
resolves the name a second time between the check and the connect. After connecting it confirms the
peer is the address it checked. The request itself still carries the original host: :mod:`._httpget`
takes the ``Host`` header and the TLS server name (SNI and certificate check) from the URL, not from
the address. Redirects are followed by the fetcher, one hop at a time, and every hop opens its
connection here, so a redirect to a refused address is refused like a first request to it. No proxy
is ever used, so environment proxy settings can't route around the check.

Which addresses are permitted is :mod:`._netpolicy`'s; this module is imported only when a
payload is fetched over HTTP.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import httpcore
import trio

from ._exceptions import AddressRefused
from ._netpolicy import IPAddress, NetworkPolicy

__all__ = ["PolicyBackend"]


class PolicyBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend (trio) that connects only to addresses the policy permits.

    :meth:`connect_tcp` resolves the host once (an IP literal isn't resolved), checks each
    address, and connects to the permitted ones in the resolver's order, each given as an IP
    literal, so the address checked is the address connected to. It raises
    :class:`AddressRefused` when no address is permitted, without opening any socket, and
    ``httpcore.ConnectError`` when the name doesn't resolve or no permitted address answers.
    """

    def __init__(self, policy: NetworkPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port)
        permitted: list[IPAddress] = []
        first_refusal: tuple[IPAddress, str] | None = None
        for address in addresses:
            label = self._policy.refusal(host, address)
            if label is None:
                permitted.append(address)
            elif first_refusal is None:
                first_refusal = (address, label)
        if not permitted:
            assert first_refusal is not None
            raise AddressRefused(host, *first_refusal)
        error: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in permitted:
            try:
                stream = await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            await _confirm_peer(stream, address)
            return stream
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Refused: a fetch never opens a Unix socket."""
        raise httpcore.ConnectError("unix sockets are not fetched from")

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


async def _resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (itself for an IP literal), deduplicated, in order."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise httpcore.ConnectError(f"couldn't resolve {host!r}: {exc}") from exc
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        try:
            addresses.setdefault(ipaddress.ip_address(sockaddr[0]), None)
        except ValueError:
            continue
    if not addresses:
        raise httpcore.ConnectError(f"{host!r} resolved to no IP address")
    return list(addresses)


async def _confirm_peer(stream: httpcore.AsyncNetworkStream, address: IPAddress) -> None:
    """Close ``stream`` and raise unless its peer is ``address`` (defence in depth)."""
    peer = stream.get_extra_info("server_addr")
    try:
        connected = ipaddress.ip_address(peer[0]) if peer else None
    except (TypeError, ValueError, IndexError):
        connected = None
    if connected is None or connected.packed != address.packed:
        await stream.aclose()
        raise httpcore.ConnectError(f"connected to {peer!r}, not to the checked {address}")
