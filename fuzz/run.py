"""Run every fuzz target for a while: what ``make fuzz`` runs.

Usage: ``python fuzz/run.py [--seconds N] [--plain] [TARGET ...] [-libfuzzer_option=V ...]``
(any option it doesn't know, such as ``-max_len=N``, ``-dict=FILE`` or
``-use_value_profile=1``, is handed to libFuzzer).

1. Builds the compiled content loop (``scriptbridge/_fastcontent.c``) with clang,
   AddressSanitizer, UndefinedBehaviorSanitizer (every finding fatal) and libFuzzer's coverage
   into ``build/fuzz/`` (the build beside the source, the normal install's, is not touched).
2. Runs each target (``fuzz/<target>.py``) for ``--seconds`` under the interpreter that runs
   this script; the targets that run the compiled loop (:data:`NATIVE_TARGETS`) with that
   build (``SCRIPTBRIDGE_FUZZ_NATIVE``), atheris's ASan and libFuzzer runtime preloaded and
   ``PYTHONMALLOC=malloc`` so that ASan sees Python's objects. Each
   target's corpus is ``fuzz/corpus/<target>/`` (seeds, committed) plus ``fuzz/findings/corpus/
   <target>/`` (what a run learnt, not committed); a crash, leak or broken invariant leaves its
   input in ``fuzz/findings/<target>/``.
3. Prints, for each target, its executions, coverage (libFuzzer's ``cov``: edges of Python and
   C code reached, and ``ft``: features) and corpus size, then one line per finding with the
   command that reproduces it. Exits 1 when anything was found.

``--plain`` skips the sanitizer build and runs against the normal install (no clang needed).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
FINDINGS = FUZZ / "findings"
BUILD = ROOT / "build" / "fuzz"
TARGETS = ("content_loop", "render", "frames", "mcp_stdio", "canonical")
NATIVE_TARGETS = frozenset({"content_loop", "render"})
"""The targets that run the compiled loop: these run under the sanitizers. The others read
only Python code and the wheels' own C (msgpack, pydantic-core), which the sanitizer build
doesn't instrument: ASan would slow them several times over and check nothing more."""
SANITIZE = "address,undefined"
STATUS = re.compile(r"#(\d+)\s+(?:DONE|pulse|NEW|REDUCE|INITED)\s+cov: (\d+) ft: (\d+) corp: (\d+)")


def build_native() -> Path:
    """Compile the content loop with the sanitizers into ``build/fuzz/``; returns its path."""
    compiler = os.environ.get("FUZZ_CC", "clang")
    if shutil.which(compiler) is None:
        raise SystemExit(
            f"make fuzz: {compiler} not found: the sanitizer build needs clang "
            "(apt-get install clang), or run with --plain"
        )
    BUILD.mkdir(parents=True, exist_ok=True)
    target = BUILD / ("_fastcontent" + str(sysconfig.get_config_var("EXT_SUFFIX")))
    command = [
        compiler,
        f"-fsanitize={SANITIZE},fuzzer-no-link",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        "-g",
        "-O1",
        "-fPIC",
        "-shared",
        f"-I{sysconfig.get_paths()['include']}",
        str(ROOT / "scriptbridge" / "_fastcontent.c"),
        "-o",
        str(target),
    ]
    print("make fuzz: " + shlex.join(command), flush=True)
    subprocess.run(command, check=True)
    return target


def sanitizer_env(native: Path) -> dict[str, str]:
    """The environment a target runs in under the sanitizers."""
    return {
        "SCRIPTBRIDGE_FUZZ_NATIVE": str(native),
        "LD_PRELOAD": str(Path(atheris.path()) / "asan_with_fuzzer.so"),
        "PYTHONMALLOC": "malloc",
        # CPython frees little at exit: leaks are not findings here. Every other error is.
        # No allocation stacks while fuzzing (recording one per Python object costs four
        # runs in five); a reproduction asks for them (REPRO_ASAN).
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:malloc_context_size=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }


REPRO_ASAN = "detect_leaks=0:allocator_may_return_null=1:malloc_context_size=30"


def run_target(
    name: str, seconds: int, env: dict[str, str], extra: list[str]
) -> tuple[str, list[Path]]:
    """Run one target for ``seconds``; returns its summary line and the findings it left."""
    out = FINDINGS / name
    learnt = FINDINGS / "corpus" / name
    out.mkdir(parents=True, exist_ok=True)
    learnt.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    log = FINDINGS / f"{name}.log"
    command = [
        sys.executable,
        str(FUZZ / f"{name}.py"),
        f"-max_total_time={seconds}",
        f"-artifact_prefix={out}/",
        "-print_final_stats=1",
        "-timeout=20",
        "-rss_limit_mb=4096",
        *extra,
        str(learnt),
        str(FUZZ / "corpus" / name),
    ]
    with log.open("w") as sink:
        done = subprocess.run(
            command, env={**os.environ, **env}, stdout=sink, stderr=subprocess.STDOUT, check=False
        )
    text = log.read_text(errors="replace")
    statuses = STATUS.findall(text)
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
    executions = int(runs[-1]) if runs else (int(statuses[-1][0]) if statuses else 0)
    cov, ft, corp = statuses[-1][1:] if statuses else ("?", "?", "?")
    new = sorted(set(out.iterdir()) - before)
    found = [path for path in new if not path.name.startswith("slow-unit-")]
    slow = len(new) - len(found)  # an input over 10 s: kept, not a finding (-timeout is one)
    verdict = "ok" if done.returncode == 0 and not found else f"FOUND (exit {done.returncode})"
    verdict += f", {slow} slow" if slow else ""
    line = (
        f"{name:<13} {verdict:<16} executions {executions:>9}  cov {cov:>5}  ft {ft:>6}  "
        f"corpus {corp:>5}  ({seconds} s; log {log.relative_to(ROOT)})"
    )
    return line, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_S", "10")))
    parser.add_argument("--plain", action="store_true", help="no sanitizer build")
    parser.add_argument("targets", nargs="*", default=list(TARGETS))
    args, extra = parser.parse_known_args()  # the rest goes to libFuzzer (-max_len=N, ...)
    env = {} if args.plain else sanitizer_env(build_native())
    lines, findings = [], []
    for name in args.targets:
        print(f"make fuzz: {name} for {args.seconds} s", flush=True)
        line, found = run_target(name, args.seconds, env if name in NATIVE_TARGETS else {}, extra)
        print(line, flush=True)
        lines.append(line)
        findings += [(name, path) for path in found]
    print("\nmake fuzz: summary")
    for line in lines:
        print("  " + line)
    for name, path in findings:
        native = {**env, "ASAN_OPTIONS": REPRO_ASAN} if name in NATIVE_TARGETS and env else {}
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in native.items())
        repro = f"{prefix} {sys.executable} fuzz/{name}.py {path.relative_to(ROOT)}".strip()
        print(f"  finding: {path.relative_to(ROOT)}\n    reproduce: cd {ROOT} && {repro}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
