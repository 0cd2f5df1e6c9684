"""The security suite's table of blocked counts, printed at the end of a run.

The table has a row per attack category and a column per configuration (all layers on; the
language layer off; the OS layers off), each cell ``blocked/run``; below it, the attacks that
only one layer stops (those that got past the other layer alone), and the attacks not run in
some configuration. Reproduce it with ``.venv/bin/pytest tests/security``.

Its hook lives in the top conftest (``tests/conftest.py`` imports it): under ``pytest -n 2``
only that conftest is the controller's, and the controller is what prints; the attack runs tag
their reports in ``tests/security/conftest.py``, which the workers load as they collect.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

CONFIGURATIONS = {
    "full": "all layers",
    "language-off": "language off",
    "os-off": "OS layers off",
    "language-off@user": "user: lang off",
}
"""The columns: the zygote started as the tests run, then as an ordinary user (``@user``: the
OS categories with the language layer off, the OS layers' own test)."""


def _runs(terminalreporter: pytest.TerminalReporter) -> list[dict[str, Any]]:
    """The properties of every attack run (its call phase) and every skipped attack."""
    found = []
    for outcome in ("passed", "failed", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            properties = dict(getattr(report, "user_properties", []))
            if "security_mode" not in properties or "security_category" not in properties:
                continue
            if outcome == "skipped":
                longrepr = getattr(report, "longrepr", None)
                why = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
                why = why.removeprefix("Skipped: ")
                found.append(properties | {"security_verdict": "not run", "security_why": why})
            elif getattr(report, "when", None) == "call" and "security_verdict" in properties:
                found.append(properties)
    return found


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print blocked counts per category and configuration, and the one-layer attacks."""
    runs = _runs(terminalreporter)
    if not runs:
        return
    blocked: Counter[tuple[str, str]] = Counter()
    ran: Counter[tuple[str, str]] = Counter()
    not_run: list[str] = []
    one_layer: list[str] = []
    controls = Counter(
        (run["security_mode"], run["security_verdict"])
        for run in runs
        if run["security_mode"] in ("control", "control@user")
        and run["security_verdict"] != "not run"
    )
    categories: list[str] = []
    for run in runs:
        mode, category = run["security_mode"], run["security_category"]
        if category not in categories:
            categories.append(category)
        if mode in ("control", "control@user"):
            if run["security_verdict"] == "not run":
                who = "as an ordinary user" if mode == "control@user" else "as the tests run"
                not_run.append(f"{run['security_case']} (control, {who}): {run['security_why']}")
            continue
        if run["security_verdict"] == "not run":
            not_run.append(
                f"{run['security_case']} ({CONFIGURATIONS[mode]}): {run['security_why']}"
            )
            continue
        ran[(category, mode)] += 1
        blocked[(category, mode)] += run["security_verdict"] == "blocked"
        if run.get("security_other_layer") and run["security_verdict"] != "blocked":
            layer = "the language layer" if mode == "language-off" else "the OS layers"
            one_layer.append(f"{run['security_case']} ({category}): only {layer}")
    write = terminalreporter.write_line
    terminalreporter.section("sandbox security suite: blocked/run per category and configuration")
    write(f"{'category':<16}" + "".join(f"{label:>16}" for label in CONFIGURATIONS.values()))
    for category in categories:
        cells = []
        for mode in CONFIGURATIONS:
            total = ran[(category, mode)]
            cells.append(f"{blocked[(category, mode)]}/{total}" if total else "-")
        write(f"{category:<16}" + "".join(f"{cell:>16}" for cell in cells))
    totals = [f"{sum(blocked[(c, m)] for c in categories)}/{sum(ran[(c, m)] for c in categories)}"
              for m in CONFIGURATIONS]  # fmt: skip
    write(f"{'all':<16}" + "".join(f"{cell:>16}" for cell in totals))
    write(f"stopped by one layer only ({len(one_layer)}):")
    for line in sorted(one_layer):
        write(f"  {line}")
    if not_run:
        write(f"not run ({len(not_run)}):")
        for line in sorted(not_run):
            write(f"  {line}")
    for mode, who in (("control", "as the tests run"), ("control@user", "as an ordinary user")):
        total = sum(count for (where, _), count in controls.items() if where == mode)
        if total:
            escaped = controls[(mode, "escaped")]
            write(f"both layers off, {who}: {escaped}/{total} attacks succeeded unprotected")
