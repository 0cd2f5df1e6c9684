"""Warm-up: the zygote exercises a whole run before it forks, and each child again while it
waits for ``start``, so a run does neither the imports nor the page copies it would otherwise do.

:func:`warm_up` (in the zygote, before any fork) runs one complete conversation in-process with
canned host replies; :func:`prime` (in a child that said ``ready`` and has no ``start`` waiting
yet: :func:`sandbox._runtime.serve`'s ``idle``) goes once through what every run does, without
I/O. Neither raises, and nothing of either is visible to a run's script.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Final

from ._blocking_channel import BlockingChannel
from ._compile import compile_script
from ._runtime import run, serve
from ._session import Session
from ._wire import (
    CallOk,
    Done,
    FetchResult,
    Start,
    ToolFailed,
    ToolResult,
    ToolResults,
    read_host_message,
)
from .protocol._framing import encode_frame, unpack_body

__all__ = ["prime", "prime_run", "warm_up"]

_PRIME_SCRIPT: Final = (
    "values = [1, 'a', {'k': 2.0}]\nfor v in values:\n    last = v\n{'n': len(values)}\n"
)


def prime() -> None:
    """Go once through what every run does, without I/O, in a child waiting for ``start``.

    A forked child's first touch of each page it shares with the zygote copies that page; a
    run then pays for hundreds of such copies between ``start`` and ``done``. Parsing a
    ``start``, compiling and running a tiny script in its own throwaway globals, and encoding a
    ``done`` here copies most of those pages while the child is still a spare, off the
    request path (a child whose ``start`` is already there skips it: its run copies only the
    pages it needs). Trusted code only; nothing of it is visible to the run's script (its globals
    are built afresh). Never raises: priming is only an optimisation (:func:`prime_run` is
    the same pass, raising).
    """
    with contextlib.suppress(Exception):
        prime_run()


def prime_run() -> bytes:
    """:func:`prime`'s pass; returns the ``done`` frame it encoded. Raises whatever the pass
    raised (a run that failed raises ``RuntimeError``)."""
    start = read_host_message(encode_frame(Start(source=_PRIME_SCRIPT))[4:])
    assert isinstance(start, Start)
    session = Session(BlockingChannel(-1, -1), start)
    outcome = run(session, start.source, restricted=True)
    if not isinstance(outcome, tuple):
        raise RuntimeError(f"the priming script failed: {outcome!r}")
    return encode_frame(session._done(outcome[0]))


_WARM_UP_SCRIPT: Final = """
import json, math, re, datetime, collections, itertools, functools, statistics, random
import string, textwrap, base64, hashlib, decimal, fractions, heapq, bisect, difflib, time
from datetime import datetime as moment
stamp = moment.strptime("2024-01-02 03:04", "%Y-%m-%d %H:%M")
now = datetime.datetime.now().isoformat() + stamp.strftime("%A %d %B %Y %H:%M")
digests = [hashlib.sha256(b"x").hexdigest(), hashlib.md5(b"x").hexdigest(),
           hashlib.sha3_256(b"").hexdigest(), hashlib.blake2b(b"").hexdigest()]
print("warm", json.dumps({"a": [1, 2]}), f"{math.pi:.2f}", sep="|")
view = call_tool("warm.up", {"a": 1})
views = call_tools([("warm.up", {}), ("warm.up", {"b": [1, 2]})])
path = fetch({"type": "reference", "id": "ref_warm"})
try:
    tools.warm_up()
except ToolError as exc:
    failed = str(exc)
for first, second in [(1, 2)]:
    total = first + second
counter = collections.Counter("abcab").most_common(1)
number = decimal.Decimal("1.1") + 1 + fractions.Fraction(1, 3).numerator
mean = statistics.mean([1, 2, 3]) + statistics.median([1, 2]) + statistics.stdev([1, 2])
text = textwrap.fill("a b c", 2) + "".join(difflib.unified_diff(["a"], ["b"]))
text += re.sub("a+", "b", "aaa") + base64.b64encode(b"x").decode() + string.ascii_letters
heap = [3, 1]
heapq.heapify(heap)
bisect.insort(heap, 2)
ticks = time.monotonic() + random.random()
joined = list(itertools.chain([1], [2])) + [functools.reduce(lambda a, b: a + b, [1, 2])]
class Thing:
    def __init__(self):
        self.value = 1
thing = Thing()
thing.value = thing.value + 1
{"value": [1, (2, 3)], "bytes": b"x", "printed": printed}
"""


def warm_up() -> None:
    """Run one complete conversation in-process over real pipes, with canned host replies.

    Imports and exercises everything a child needs (the compiler, the hooks, every allowlisted
    module, the protocol both ways, codecs, ``strptime`` and the local time zone), so that a
    forked child never has to read a file it cannot reach once isolated. Never raises: a
    failure only leaves the child colder, and is reported on stderr.
    """
    import codecs

    codec_names = (
        "ascii",
        "latin-1",
        "utf-16",
        "utf-32",
        "utf-8-sig",
        "cp1252",
        "iso8859-15",
        "idna",
    )
    for name in codec_names:
        codecs.lookup(name)
    replies = [
        Start(source=_WARM_UP_SCRIPT, tools=["warm.up"], inputs={"q": "x"}),
        ToolResult(call_id=1, view={"content": [], "data": None, "isError": False}),
        ToolResults(call_id=2, results=[CallOk(view={}), CallOk(view={"b": b"\0"})]),
        FetchResult(call_id=3, saved_to="refs/ref_warm.txt"),
        ToolFailed(call_id=4, message="warm"),
    ]
    host_read, child_write = os.pipe()
    child_read, host_write = os.pipe()
    try:
        for message in replies:
            os.write(host_write, encode_frame(message))
        status = serve(
            BlockingChannel(child_read, child_write), applied=[], skipped=[], restricted=True
        )
        os.close(child_write)
        child_write = -1
        received = BlockingChannel(host_read, host_read)
        last: object = None
        while (body := received.read_body()) is not None:
            last = unpack_body(body)  # what the child sent, as the map it is (no validation)
        compile_script("x = (", restricted=True)
        compile_script("x._y", restricted=True)
        if status != 0 or not isinstance(last, dict) or last.get("op") != Done.op:
            print(f"sandbox warm-up ended with {status}: {last!r}", file=sys.stderr)
    except Exception as exc:  # pragma: no cover - only a broken installation gets here
        print(f"sandbox warm-up failed: {exc!r}", file=sys.stderr)
    finally:
        for fd in (host_read, child_write, child_read, host_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
