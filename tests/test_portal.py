"""``run_on_loop``: a trio task awaiting a coroutine on an asyncio loop in another thread (what
each host coroutine tool's call under asyncio does). Real loops in real threads."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import pytest
import trio

from scriptbridge._portal import run_on_loop


@pytest.fixture
def host_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An asyncio loop running in a thread of its own, as an asyncio host's is."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_a_value_and_an_exception_come_back_from_the_host_loop(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    async def answer() -> tuple[str, bool]:
        return threading.current_thread().name, asyncio.get_running_loop() is host_loop

    async def fails() -> None:
        raise KeyError("nope")

    async def main() -> None:
        name, on_host_loop = await run_on_loop(host_loop, answer())
        assert on_host_loop and name != threading.current_thread().name
        with pytest.raises(KeyError, match="nope"):
            await run_on_loop(host_loop, fails())

    trio.run(main)


def test_a_cancel_does_not_wait_for_a_coroutine_that_ignores_it(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    """Cancelling the trio side returns at once, even when the coroutine goes on for a second
    after its own cancellation (a run's wall time must not wait on a host's tool)."""
    finished = threading.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(1.0)
            finished.set()

    async def main() -> bool:
        with trio.move_on_after(0.2):
            await run_on_loop(host_loop, stubborn())
        return finished.is_set()

    assert trio.run(main) is False, "the cancel waited for the coroutine's clean-up"
    assert finished.wait(5), "the coroutine was not let go on to its end"


def test_what_a_coroutine_raises_after_it_was_let_go_is_logged(
    host_loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """A coroutine whose caller stopped waiting, and which then fails (its clean-up raised),
    is a host bug nobody would hear of: it is logged as a warning, with its traceback."""

    async def cleans_up_badly() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise ValueError("clean-up failed") from None

    async def main() -> None:
        with trio.move_on_after(0.2):
            await run_on_loop(host_loop, cleans_up_badly())
        with trio.fail_after(5):
            while not caplog.records:
                await trio.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="scriptbridge"):
        trio.run(main)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is not None
    assert "clean-up failed" in str(record.exc_info[1])
