"""Tests for the network policy: address kinds, the allowlist, and the connect-time check."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest
import trio
from loopback_http import body, start_server
from test_httpget import get_body

from scriptbridge._exceptions import FetchError
from scriptbridge._netpolicy import AddressRefused, NetworkPolicy, address_label
from scriptbridge._policy_backend import PolicyBackend


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("64:ff9b::7f00:1", "a loopback address"),  # NAT64 of 127.0.0.1
        ("10.1.2.3", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.1.1", "a private address"),
        ("100.64.0.1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%2", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("240.0.0.1", "a reserved address"),
        ("255.255.255.255", "a reserved address"),
        ("192.0.2.7", "a reserved address"),
        ("2001:db8::1", "a reserved address"),
        ("2002:7f00:1::", "a reserved address"),  # 6to4
        ("2001::1", "a reserved address"),  # Teredo
        ("::7f00:1", "a reserved address"),  # IPv4-compatible (deprecated)
        ("169.254.169.254", "a cloud metadata address"),
        ("::ffff:169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("168.63.129.16", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("8.8.8.8", None),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
        ("64:ff9b::808:808", None),  # NAT64 of a public address
    ],
)
def test_address_kinds(address: str, label: str | None) -> None:
    """Every non-public kind is named; public unicast addresses are not refused."""
    assert address_label(ipaddress.ip_address(address)) == label


def test_default_policy_refuses_what_isnt_public() -> None:
    """Without an allowlist, loopback is refused and a public address permitted."""
    policy = NetworkPolicy()
    assert policy.refusal("x", ipaddress.ip_address("127.0.0.1")) == "a loopback address"
    assert policy.refusal("x", ipaddress.ip_address("8.8.8.8")) is None


def test_allowlist_addresses_networks_and_hosts() -> None:
    """Listed addresses, networks and host names are permitted, and nothing beyond them."""
    policy = NetworkPolicy(["127.0.0.1", "10.0.0.0/8", "[fd00::1]", "Files.Internal."])
    ip = ipaddress.ip_address
    assert policy.refusal("a", ip("127.0.0.1")) is None
    assert policy.refusal("a", ip("::ffff:127.0.0.1")) is None
    assert policy.refusal("a", ip("127.0.0.2")) == "a loopback address"
    assert policy.refusal("a", ip("10.9.8.7")) is None
    assert policy.refusal("a", ip("fd00::1")) is None
    assert policy.refusal("a", ip("192.168.0.1")) == "a private address"
    assert policy.refusal("files.internal", ip("192.168.0.1")) is None
    assert policy.refusal("FILES.INTERNAL.", ip("192.168.0.1")) is None
    assert policy.refusal("other.internal", ip("192.168.0.1")) == "a private address"


def test_metadata_needs_its_exact_address() -> None:
    """A broad network or a host name doesn't open a metadata address; naming it does."""
    ip = ipaddress.ip_address("169.254.169.254")
    assert NetworkPolicy(["0.0.0.0/0", "169.254.0.0/16"]).refusal("a", ip) is not None
    assert NetworkPolicy(["metadata.internal"]).refusal("metadata.internal", ip) is not None
    assert NetworkPolicy(["169.254.169.254"]).refusal("a", ip) is None


@pytest.mark.parametrize("entry", ["", " ", "http://x", "a/b", "x y", "a:80", "10.0.0.0/33"])
def test_invalid_allow_entries_raise(entry: str) -> None:
    """An entry that is no address, network or host name is a ValueError at construction."""
    with pytest.raises(ValueError):
        NetworkPolicy([entry])


def test_allow_must_be_a_list() -> None:
    """A bare string (a common slip) is refused rather than read letter by letter."""
    with pytest.raises(ValueError):
        NetworkPolicy("127.0.0.1")  # type: ignore[arg-type]


async def test_refused_literal_is_never_connected(nursery: trio.Nursery) -> None:
    """A refused IP literal raises AddressRefused and no connection reaches the server."""
    server = await start_server(nursery)
    backend = PolicyBackend(NetworkPolicy())
    with pytest.raises(AddressRefused) as info:
        await backend.connect_tcp("127.0.0.1", server.port)
    assert info.value.label == "a loopback address"
    with pytest.raises(AddressRefused):
        await get(server.url("/x"), NetworkPolicy())
    assert server.hits == {}


async def get(url: str, policy: NetworkPolicy) -> bytes:
    """The body of ``GET url`` through the fetcher's HTTP client under ``policy``."""
    return (await get_body(url, backend=PolicyBackend(policy)))[1]


class _Resolver(trio.abc.HostnameResolver):
    """A resolver that answers ``rebind.test`` with each address of ``answers`` in turn."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def getaddrinfo(
        self,
        host: bytes | None,
        port: bytes | str | int | None,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[Any]:
        assert host == b"rebind.test"
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, int(port or 0)))]

    async def getnameinfo(self, sockaddr: Any, flags: int) -> tuple[str, str]:
        raise NotImplementedError


async def test_the_checked_address_is_the_connected_one(nursery: trio.Nursery) -> None:
    """A rebinding resolver is asked once per connection; the checked IP is connected to, and
    the request still names the original host."""
    server = await start_server(nursery)
    server.routes["/x"] = body(b"hello")
    resolver = _Resolver("127.0.0.1", "127.0.0.2")  # the second answer would be refused
    old = trio.socket.set_custom_hostname_resolver(resolver)
    try:
        policy = NetworkPolicy(["127.0.0.1"])
        assert await get(f"http://rebind.test:{server.port}/x", policy) == b"hello"
        assert resolver.calls == 1
        # The next connection resolves again, gets 127.0.0.2, and is refused unconnected.
        with pytest.raises(AddressRefused) as info:
            await get(f"http://rebind.test:{server.port}/x", policy)
        assert str(info.value.address) == "127.0.0.2"
    finally:
        trio.socket.set_custom_hostname_resolver(old)
    assert server.hits["/x"] == 1
    assert server.requests[0].headers["host"] == f"rebind.test:{server.port}"


async def test_a_host_name_resolving_to_loopback_is_refused(nursery: trio.Nursery) -> None:
    """localhost is judged by what it resolves to: refused by default, allowed by name."""
    server = await start_server(nursery)
    server.routes["/x"] = body(b"ok")
    url = f"http://localhost:{server.port}/x"
    with pytest.raises(AddressRefused):
        await get(url, NetworkPolicy())
    assert server.hits == {}
    assert await get(url, NetworkPolicy(["localhost"])) == b"ok"


async def test_a_refused_connection_is_an_http_error(nursery: trio.Nursery) -> None:
    """A permitted address that refuses the connection raises FetchError (not httpcore's)."""
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: the connect is refused
        with pytest.raises(FetchError, match="couldn't connect"):
            await get(f"http://127.0.0.1:{port}/", NetworkPolicy(["127.0.0.1"]))
