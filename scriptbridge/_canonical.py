"""Canonical keys of uris: one key per request the fetcher would actually make (SPEC section 4).

Never marks, every check of one, and every saved copy are keyed by :func:`canonical_key`, so
no spelling of a uri undoes another spelling's mark. For ``http``/``https`` the key is what
the fetcher requests (it parses with ``httpx.URL``, connects to the host's address and sends
the path and query), normalized the way RFC 3986 section 6 allows without changing what a
server sees:

- scheme and host lowercased, the host IDNA-encoded, one trailing dot dropped;
- an IP literal in canonical form: IPv4 in every spelling ``inet_aton`` accepts (``0x7f.0.0.1``,
  ``2130706433``, ``0177.1``) becomes its dotted quad, IPv6 its compressed form, and an
  IPv4-mapped IPv6 address its IPv4 address;
- the default port dropped; an empty path is ``/``; dot segments removed;
- percent-encoding normalized: unreserved characters decoded, hex digits uppercased, and a
  stray ``%`` (not two hex digits after it) written ``%25``, the literal percent a lenient
  server reads it as (joining the two errs toward a shared key, and keeps every key its own);
- the fragment and any userinfo dropped (the fetcher refuses uris with userinfo anyway).

For any other scheme the key is the uri as sent, with its scheme lowercased; a string without a
scheme is its own key. A uri that ``http``/``https`` parsing can't read gets the key
``"unparsable:" + uri`` (the fetcher can't request it either). Keys err toward joining: two
uris that lead to one request always share a key; two that share a key lead to one request
or to none.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import httpx

__all__ = ["canonical_key"]

_FAST: Final = re.compile(
    r"(https?)://([a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z][a-z0-9-]*)((?:/[A-Za-z0-9\-_~!$&'()*+,;=:@]+)*/?)"
    r"(\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*)?"
)
"""An http(s) uri already in canonical form: a lowercase dotted name whose last label starts
with a letter (so it is no IPv4 spelling), no port, no userinfo, no fragment, no percent sign,
no dot segment (no ``.`` in the path at all; a path with one takes the full route). Its key is
the uri itself, with ``/`` put in for an empty path (before a query too): the full route's key,
as ``tests/test_canonical.py`` checks on every spelling class and on generated uris."""

_IPV4_SPELLING: Final = re.compile(r"(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}")
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})?")
"""An escape, or a stray ``%`` (no two hex digits after it): the literal percent ``%25`` is."""
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def canonical_key(uri: str) -> str:
    """The canonical key of ``uri`` (see the module docstring). Pure; never raises."""
    fast = _FAST.fullmatch(uri)
    if fast is not None:
        if fast.group(3):
            return uri
        end = fast.end(2)  # an empty path is "/", also before a query
        return f"{uri[:end]}/{uri[end:]}"
    return _full_key(uri)


def _full_key(uri: str) -> str:
    """The canonical key of any uri, by the full route (what :func:`canonical_key` gives)."""
    scheme, colon, rest = uri.partition(":")
    if not colon or not scheme:
        return uri
    lowered = scheme.lower()
    if lowered not in _DEFAULT_PORTS:
        return f"{lowered}:{rest}"
    import httpx  # the full route only: a canonical uri (most of them) never loads httpx

    try:
        return _http_key(httpx.URL(uri))
    except (ValueError, TypeError, UnicodeError, httpx.InvalidURL):
        return f"unparsable:{uri}"


def _http_key(url: httpx.URL) -> str:
    host = _canonical_host(url.raw_host.decode("ascii"))
    if not host:
        raise ValueError("no host")
    port = url.port
    authority = host if port is None or port == _DEFAULT_PORTS[url.scheme] else f"{host}:{port}"
    raw = url.raw_path.decode("ascii")
    path, question, query = raw.partition("?")
    path = _remove_dot_segments(_normalize_percent(path)) or "/"
    target = f"{path}?{_normalize_percent(query)}" if question else path
    return f"{url.scheme}://{authority}{target}"


def _canonical_host(host: str) -> str:
    host = host.lower()
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
        mapped = address.ipv4_mapped  # a dual-stack connect to it reaches the IPv4 address
        return str(mapped) if mapped is not None else f"[{address.compressed}]"
    if _IPV4_SPELLING.fullmatch(host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            return host  # not an address inet_aton reads (an out-of-range part): a name
    return host


def _normalize_percent(text: str) -> str:
    """Escapes of unreserved characters decoded, every other escape in upper case, and a stray
    ``%`` written ``%25``: so decoding can't join a stray ``%`` to what follows into a new
    escape, and a key is its own key."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "%25"
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else f"%{match.group(1).upper()}"

    return _PERCENT.sub(one, text) if "%" in text else text


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on an absolute path."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments[1:], start=1):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    return "/" + "/".join(output)
