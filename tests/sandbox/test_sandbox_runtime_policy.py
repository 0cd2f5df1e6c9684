"""Tests of the runtime's compile policy for augmented assignment, priming and the hard exit."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox import BlockingChannel, _wire
from sandbox._compile import compile_script
from sandbox._runtime import serve
from sandbox._warm import prime, prime_run, warm_up
from sandbox.protocol import Done, Ending, Ready, RunError, Start, encode_frame, parse_child_message
from sandbox.testing import RunRecord

Run = Callable[..., RunRecord]


def test_augmented_assignment_of_names_is_native() -> None:
    """``name += value`` compiles to an in-place operator, with no hook call."""
    compiled = compile_script("total = 0\nfor i in range(3):\n    total += i\n", restricted=True)
    assert not isinstance(compiled, _wire.RunError)
    body, _, _ = compiled
    assert "_inplacevar_" not in body.co_names


def test_augmented_assignment_keeps_every_check() -> None:
    """Attribute and item targets, and names starting with ``_``, are still refused."""
    for source in ("a.b += 1\n", "a[0] += 1\n", "_x = 1\n_x += 1\n", "y = 1\ny += _z\n"):
        assert isinstance(compile_script(source, restricted=True), _wire.RunError), source


def test_augmented_assignment_runs(run: Run) -> None:
    """Every augmented operator on a name gives what Python gives."""
    record = run(
        "a = 7\na += 2\na -= 1\na *= 3\na //= 5\na %= 3\na **= 3\na <<= 2\na >>= 1\n"
        "a |= 1\na ^= 3\na &= 6\nb = [1]\nb += [2]\nc = 7\nc /= 2\n[a, b, c]\n"
    )
    assert record.ok, record.final
    a = 7
    a += 2
    a -= 1
    a *= 3
    a //= 5
    a %= 3
    a **= 3
    a <<= 2
    a >>= 1
    a |= 1
    a ^= 3
    a &= 6
    assert record.value == [a, [1, 2], 3.5]


def test_priming_runs_a_whole_script_and_returns_quietly() -> None:
    """Priming compiles and runs its tiny script in-process to a real ``done`` (what it encodes
    is checked), and prime() itself returns quietly, twice."""
    done = parse_child_message(prime_run()[4:])
    assert isinstance(done, Done) and done.value == {"n": 3}
    prime()
    prime()


def test_the_warm_up_runs_a_whole_conversation_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    """The zygote's warm-up (a run against canned host replies) ends with ``done`` and says
    nothing: it reports on stderr any run that ended otherwise."""
    warm_up()
    assert capsys.readouterr().err == ""


def serve_in_process(*, start_waits: bool) -> tuple[list[str], list[object]]:
    """Serve one run in this process over pipes, with ``start`` written before ``ready`` is
    sent or only once the idle work runs; returns the order of events and what was sent."""
    child_read, host_write = os.pipe()
    host_read, child_write = os.pipe()
    events: list[str] = []
    start = encode_frame(Start(source="1 + 1"))

    def idle() -> None:
        events.append("idle")
        os.write(host_write, start)

    try:
        if start_waits:
            os.write(host_write, start)
        status = serve(
            BlockingChannel(child_read, child_write),
            applied=[],
            skipped=[],
            restricted=True,
            idle=idle,
        )
        events.append(f"status {status}")
        os.close(child_write)
        child_write = -1
        sent = []
        received = BlockingChannel(host_read, host_read)
        while (message := received.receive_child()) is not None:
            sent.append(message)
        return events, sent
    finally:
        for fd in (child_read, host_write, host_read, child_write):
            if fd >= 0:
                os.close(fd)


def test_the_idle_work_runs_after_ready_while_no_start_waits() -> None:
    """A child's idle work (its priming) runs once ``ready`` is sent and only while no
    ``start`` is waiting: a start that is already there is served at once."""
    events, sent = serve_in_process(start_waits=False)
    assert events == ["idle", "status 0"]
    assert isinstance(sent[0], Ready) and isinstance(sent[-1], Done) and sent[-1].value == 2
    events, sent = serve_in_process(start_waits=True)
    assert events == ["status 0"]
    assert isinstance(sent[-1], Done) and sent[-1].value == 2


def test_no_script_code_runs_after_done(run: Run, workspace: Path) -> None:
    """A suspended generator's ``finally`` (freed after the last message) never runs: the
    child exits right after ``done``."""
    record = run(
        "def late():\n"
        "    try:\n"
        "        yield 1\n"
        "    finally:\n"
        "        write_text('out/late.txt', 'ran after done')\n"
        "def make():\n"
        "    held = late()\n"
        "    next(held)\n"
        "    return [held]\n"  # held by the value only: freed once the value is released
        "make()\n"
    )
    assert record.ok and record.final is not None
    assert record.exit is not None and record.exit.returncode == 0
    assert not (workspace / "out" / "late.txt").exists()


def test_a_tampered_limit_stop_still_ends_the_run_with_its_own_error() -> None:
    """The last message comes from what the session recorded when it stopped the run, not from
    the exception object a script may hold and change."""
    import os

    from sandbox import BlockingChannel, _session

    host_read, child_write = os.pipe()
    try:
        session = _session.Session(BlockingChannel(-1, child_write), _wire.Start(source=""))
        try:
            session._stop(_session.LimitExceeded(Ending.ToolCallsExceeded, "too many calls"))
        except _session.LimitExceeded as stop:
            held = stop

        class Loud:
            def __str__(self) -> str:
                raise ValueError("no")

        held.kind = 7  # type: ignore[assignment]
        held.args = (Loud(),)
        session.finish(_wire.RunError(type="Ignored", message="", phase="run"))
        os.close(child_write)
        child_write = -1
        last = BlockingChannel(host_read, host_read).receive_child()
    finally:
        for fd in (host_read, child_write):
            if fd >= 0:
                os.close(fd)
    assert isinstance(last, RunError)
    assert (last.type, last.message) == ("ToolCallsExceeded", "too many calls")
