"""What ``run_python`` hands a client's model in ``structuredContent``: what a model needs by
default (ok, value, printed, error, files, what a session step dropped, a value's note), and
the rest (isolation, timings, counts) only with ``--result-detail full``.

The real ``serve`` command over stdio.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from serving import Raw

BRIEF_FIELDS = {"ok", "value", "stdout", "error", "outputs", "dropped", "value_note", "session"}


def structured(tmp_path: Path, *args: str) -> dict[str, object]:
    raw = Raw("--workspace", str(tmp_path / "ws"), *args)
    try:
        raw.initialize()
        raw.call("run", "run_python", {"code": "print('hi')\nwrite_text('out/a.txt', 'x')\n6 * 7"})
        answer = raw.receive("run")["result"]
        assert answer["isError"] is False, answer
        content: dict[str, object] = answer["structuredContent"]
        return content
    finally:
        raw.process.kill()
        raw.process.wait()


@pytest.mark.parametrize("args", [(), ("--result-detail", "brief")])
def test_by_default_the_model_gets_what_it_needs(tmp_path: Path, args: tuple[str, ...]) -> None:
    """By default (``--result-detail brief``, API.md's name) ``structuredContent`` holds the
    run's outcome, and not the isolation list, timings or counts."""
    content = structured(tmp_path, *args)
    assert set(content) == BRIEF_FIELDS
    assert content["ok"] is True and content["value"] == 42 and content["stdout"] == "hi\n"
    (written,) = content["outputs"]  # type: ignore[misc]
    assert str(written).endswith("/out/a.txt") and content["error"] is None


@pytest.mark.parametrize("detail", ["full"])
def test_result_detail_full_gives_everything(tmp_path: Path, detail: str) -> None:
    """``--result-detail full`` adds the isolation list, the duration and the counts."""
    content = structured(tmp_path, "--result-detail", detail)
    assert set(content) > BRIEF_FIELDS
    assert {"isolation", "duration_s", "tool_calls", "fetches"} <= set(content)
