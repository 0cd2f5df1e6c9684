"""Benchmark: the fetcher's HTTP client against httpx's own client, over TLS, in the same run.

Serves one random payload (default 100 MiB) over TLS on 127.0.0.1 from this process (trio, a
certificate from a private ``trustme`` authority), then alternates a GET through
``scriptbridge._httpget.http_get`` and one through ``httpx.AsyncClient.stream``, each body
hashed with sha256 as the fetcher does, and prints each one's time and page faults, and the
median ratio ours/httpx (lower is better). Everything runs on one CPU, server included, so the
figures are CPU cost: mostly the TLS encryption both sides share.

Why it exists: over TLS, reading 1 MiB at a time cost ~29,000 page faults per 100 MiB (a fresh
buffer per read, cut down to one TLS record), 1.2x httpx's time; see ``_httpget.TLS_READ_SIZE``.

    .venv/bin/python benchmarks/fetch_tls.py [--size-mib 100] [--runs 5] [--cpu 0]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import ssl
import statistics
import time
from typing import Any

import httpx
import trio
import trustme

from scriptbridge._httpget import http_get
from scriptbridge._netpolicy import NetworkPolicy
from scriptbridge._policy_backend import PolicyBackend

MIB = 1 << 20


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


async def _serve(data: bytes, context: ssl.SSLContext, task_status: Any) -> None:
    async def handler(stream: trio.SSLStream[trio.SocketStream]) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            piece = await stream.receive_some(65536)
            if not piece:
                return
            head += piece
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(data)
        )
        view = memoryview(data)
        for start in range(0, len(data), MIB):
            await stream.send_all(view[start : start + MIB])
        await stream.aclose()

    await trio.serve_ssl_over_tcp(
        handler, 0, context, host="127.0.0.1", https_compatible=True, task_status=task_status
    )


async def _compare(size: int, runs: int) -> None:
    data = os.urandom(size)
    expected = hashlib.sha256(data).hexdigest()
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    authority.configure_trust(client_context)
    backend = PolicyBackend(NetworkPolicy(["127.0.0.1"]))
    ours: list[float] = []
    theirs: list[float] = []
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(_serve, data, server_context)
        url = f"https://127.0.0.1:{listeners[0].transport_listener.socket.getsockname()[1]}/x"
        async with httpx.AsyncClient(verify=client_context) as client:
            for run in range(runs + 1):  # the first of each is a warm-up
                faults, started, digest = _faults(), time.perf_counter(), hashlib.sha256()
                async with http_get(httpx.URL(url), backend, tls=client_context) as response:
                    async for piece in response.body():
                        digest.update(piece)
                elapsed, our_faults = time.perf_counter() - started, _faults() - faults
                assert digest.hexdigest() == expected
                faults, started, digest = _faults(), time.perf_counter(), hashlib.sha256()
                async with client.stream("GET", url) as streamed:
                    async for piece in streamed.aiter_raw():
                        digest.update(piece)
                their_elapsed, their_faults = time.perf_counter() - started, _faults() - faults
                assert digest.hexdigest() == expected
                if run:
                    ours.append(elapsed)
                    theirs.append(their_elapsed)
                    print(
                        f"ours {elapsed * 1e3:6.0f} ms ({our_faults:6} faults)   "
                        f"httpx {their_elapsed * 1e3:6.0f} ms ({their_faults:6} faults)"
                    )
        nursery.cancel_scope.cancel()
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"median: ours {statistics.median(ours) * 1e3:.0f} ms, httpx ", end="")
    print(f"{statistics.median(theirs) * 1e3:.0f} ms; ratio ours/httpx {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU everything runs on")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    print(f"payload: {args.size_mib} MiB over TLS on 127.0.0.1, {args.runs} runs, CPU {args.cpu}")
    trio.run(_compare, args.size_mib * MIB, args.runs)


if __name__ == "__main__":
    main()
