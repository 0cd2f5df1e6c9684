"""Fixtures for the security suite, and the per-mode counts printed at the end of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from sandbox._zygote import ZygoteProcess


@pytest.fixture(scope="session")
def security_zygote() -> Iterator[ZygoteProcess]:
    """A zygote for the whole suite; stopped (with its children) at the end."""
    with ZygoteProcess.start() as process:
        yield process


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print, per mode, how many attacks were run and how many were blocked."""
    counts: Counter[tuple[str, str]] = Counter()
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", None) != "call":
                continue
            properties = dict(getattr(report, "user_properties", []))
            if "security_mode" in properties:
                mode = properties["security_mode"]
                counts[(mode, "run")] += 1
                counts[(mode, properties["security_verdict"])] += 1
    if not counts:
        return
    terminalreporter.section("sandbox security suite")
    labels = {
        "full": "all layers on (every category)",
        "language-off": "language layer off (OS categories)",
        "os-off": "OS layers off (language categories)",
        "control": "both off: attacks that must succeed",
    }
    for mode, label in labels.items():
        run = counts[(mode, "run")]
        if not run:
            continue
        if mode == "control":
            terminalreporter.write_line(
                f"{label}: {counts[(mode, 'escaped')]}/{run} succeeded unprotected"
            )
        else:
            terminalreporter.write_line(f"{label}: {counts[(mode, 'blocked')]}/{run} blocked")
