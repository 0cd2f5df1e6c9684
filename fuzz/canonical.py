#!/usr/bin/env python3
"""Fuzz target: ``canonical_key``, the uri keys never marks are kept by (SPEC section 4).

Invariant: for any uri built from the fuzzer's bytes (a scheme, userinfo, a host in every IP
spelling or a name, a port, a path with dot segments and percent escapes, a query, a fragment,
lone surrogates and any other characters, or raw text):

- :func:`canonical_key` returns a ``str`` and never raises;
- it is the full route's key (:func:`_full_key`): the shortcut for uris already canonical
  gives what the full parse gives;
- a key is its own key: an ``http``/``https`` key names the request it stands for, so read as
  a uri that can be requested it leads to that same request and must get the same key (else
  two spellings of one request could hold two keys, and a never mark on one would miss the
  other). A key need not be a uri the fetcher can request: ``hTTps://1.2.3.256。`` is a
  request to the name ``1.2.3.256.``, whose key drops that trailing dot, and without it
  ``https://1.2.3.256/`` is an IPv4 address out of range, which httpx refuses (found by this
  target; every spelling that can be requested still shares the key).

Run: ``.venv/bin/python fuzz/run.py --seconds N canonical`` (``make fuzz`` runs every target);
a finding's input, given as the only argument, runs once.
"""

from __future__ import annotations

import sys

import _coverage
import atheris

with atheris.instrument_imports(
    **_coverage.packages(
        "scriptbridge._canonical",
        "httpx._urlparse",
        "httpx._urls",
        "idna.core",
    )
):
    from scriptbridge._canonical import _full_key, canonical_key

SCHEMES = ("http", "https", "HTTP", "hTTps", "ref", "mailto", "", "file", "ftp")
HOSTS = ("h", "example.com", "EXAMPLE.com.", "127.0.0.1", "0x7f.1", "2130706433", "0177.0.0.1",
         "[::1]", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]", "xn--nxasmq6b", "bücher.de",
         "a..b", "1.2.3.256", "[v1.x]", "", "localhost", "0", "[::]", "１２７.0.0.1")  # fmt: skip
PIECES = ("/", "/a", "/./", "/../", "/.", "/..", "%2e", "%2E%2e", "%41", "%7e", "%7E", "%zz",
          "%", "?", "#", "@", ":", ";", "~", " ", "\t", "\ud800", "é", "//", "?q=1", "#f",
          ":80", ":443", ":0", ":99999", ":-1", "u:p@", "\\")  # fmt: skip


def uri(fdp: atheris.FuzzedDataProvider) -> str:
    if fdp.ConsumeIntInRange(0, 4) == 0:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 64))
    scheme = SCHEMES[fdp.ConsumeIntInRange(0, len(SCHEMES) - 1)]
    parts = [scheme, "://" if fdp.ConsumeBool() else ":"]
    if fdp.ConsumeIntInRange(0, 3) == 0:
        parts.append(PIECES[fdp.ConsumeIntInRange(0, len(PIECES) - 1)])
    parts.append(HOSTS[fdp.ConsumeIntInRange(0, len(HOSTS) - 1)])
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        if fdp.ConsumeIntInRange(0, 3):
            parts.append(PIECES[fdp.ConsumeIntInRange(0, len(PIECES) - 1)])
        else:
            parts.append(fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 6)))
    return "".join(parts)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = uri(fdp)
    key = canonical_key(text)
    if type(key) is not str:
        raise AssertionError(f"canonical_key({text!r}) gave {key!r}")
    full = _full_key(text)
    if key != full:
        raise AssertionError(f"canonical_key({text!r}) = {key!r}, the full route's {full!r}")
    again = canonical_key(key)
    if key.startswith(("http://", "https://")) and again != key and not unrequestable(again):
        raise AssertionError(f"{text!r} -> {key!r} -> {again!r}")


def unrequestable(key: str) -> bool:
    """Whether ``key`` is the key of a uri the fetcher can't request."""
    return key.startswith("unparsable:")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
