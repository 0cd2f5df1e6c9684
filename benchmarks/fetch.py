"""Benchmark: ReferenceFetcher against ``curl -o`` on one loopback payload, in the same run.

Serves a random payload (default 100 MiB) from a separate process on 127.0.0.1 with
``sendfile``, then alternates ``curl -s -o FILE`` and ``ReferenceFetcher.fetch`` of the same URL
(each run a fresh record, so nothing is answered from an earlier copy), and prints each one's
throughput, the median ratio fetcher/curl, and the fetcher's peak memory growth (peak RSS during
its fetch minus RSS before it). curl's time is its own ``%{time_total}`` (no process start-up).

Goals (issue 3): ratio at least 0.8, peak growth under 32 MiB.

    .venv/bin/python benchmarks/fetch.py [--size-mib 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MIB = 1 << 20


def serve(path: str) -> None:
    """Serve ``path`` to every GET on an ephemeral loopback port; print the port, run forever."""
    size = os.path.getsize(path)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)

    def handle(conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size
            )
            with open(path, "rb") as payload:
                conn.sendfile(payload)

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def write_payload(path: Path, mib: int) -> str:
    """Write ``mib`` MiB of random bytes to ``path``; return their sha256 (hex)."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(mib):
            block = os.urandom(MIB)
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def start_server(path: Path) -> tuple[subprocess.Popen[str], str]:
    """Serve ``path`` (:func:`serve`) from a child process; return it and the payload's url.
    The caller kills it."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(path)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}/payload.bin"


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark for this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def run_curl(curl: str, url: str, out: Path) -> float:
    done = subprocess.run(
        [curl, "-s", "-S", "-f", "-o", str(out), "-w", "%{time_total}", url],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout.strip())


def run_fetcher(url: str, root: Path, size: int, run: int) -> tuple[float, int, str]:
    import trio

    from scriptbridge import ReferenceRegistry
    from scriptbridge._fetcher import ReferenceFetcher, Saved
    from scriptbridge._workspace import Workspace

    registry = ReferenceRegistry()
    workspace = Workspace(root)
    fetcher = ReferenceFetcher(registry, workspace, allow=["127.0.0.1"], max_bytes=size + MIB)
    (record,) = registry.ingest(
        {"content": [{"type": "resource_link", "uri": f"{url}?run={run}", "size": size}]},
        server=None,
    )

    async def fetch() -> tuple[float, object]:
        started = time.perf_counter()
        outcome = await fetcher.fetch(record)
        return time.perf_counter() - started, outcome

    elapsed, outcome = trio.run(fetch)
    assert isinstance(outcome, Saved), outcome
    saved = workspace.root / outcome.path
    os.unlink(saved)
    return elapsed, outcome.size, outcome.sha256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    size = args.size_mib * MIB
    curl = shutil.which("curl")
    with tempfile.TemporaryDirectory(prefix="sb-bench-") as tmp:
        tmpdir = Path(tmp)
        payload = tmpdir / "payload.bin"
        expected = write_payload(payload, args.size_mib)
        server, url = start_server(payload)
        try:
            # Warm up: imports, page cache, first connections.
            run_fetcher(url, tmpdir / "ws", size, -1)
            if curl:
                run_curl(curl, url, tmpdir / "curl.bin")
                os.unlink(tmpdir / "curl.bin")  # else curl's first counted run truncates it
            curl_times: list[float] = []
            fetch_times: list[float] = []
            growth_kib: list[int] = []
            for run in range(args.runs):
                if curl:
                    curl_times.append(run_curl(curl, url, tmpdir / "curl.bin"))
                    assert (tmpdir / "curl.bin").stat().st_size == size
                    os.unlink(tmpdir / "curl.bin")
                before = _status_kib("VmRSS") or 0
                exact = _reset_peak()
                max_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                elapsed, got, sha = run_fetcher(url, tmpdir / "ws", size, run)
                assert got == size and sha == expected, "the fetched copy differs"
                fetch_times.append(elapsed)
                if exact:
                    growth_kib.append((_status_kib("VmHWM") or 0) - before)
                else:
                    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                    growth_kib.append(peak_kib - max_before)
        finally:
            server.kill()
            server.wait()

    def rate(seconds: float) -> float:
        return size / MIB / seconds

    print(f"payload: {args.size_mib} MiB from 127.0.0.1 (sendfile server), {args.runs} runs")
    print("fetcher  MiB/s: " + "  ".join(f"{rate(t):7.1f}" for t in fetch_times))
    if curl:
        print("curl -o  MiB/s: " + "  ".join(f"{rate(t):7.1f}" for t in curl_times))
    fetch_median = statistics.median(fetch_times)
    print(f"fetcher median: {rate(fetch_median):.1f} MiB/s (sha256 verified)")
    if curl:
        curl_median = statistics.median(curl_times)
        ratio = curl_median / fetch_median
        print(f"curl    median: {rate(curl_median):.1f} MiB/s")
        print(
            f"ratio fetcher/curl (medians): {ratio:.2f}  (goal >= 0.80: "
            f"{'met' if ratio >= 0.8 else 'not met'})"
        )
    else:
        print("curl not found: no ratio")
    peak = max(growth_kib) / 1024
    method = "VmHWM after reset" if _reset_peak() else "ru_maxrss (coarse)"
    print(
        f"fetcher peak memory growth: {peak:.1f} MiB (max over runs, {method}; "
        f"goal < 32 MiB: {'met' if peak < 32 else 'not met'})"
    )
    print(f"cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
