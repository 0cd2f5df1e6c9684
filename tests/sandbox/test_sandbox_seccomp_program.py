"""The seccomp program's verdicts, read by a small interpreter of the classic BPF it is made of:
every call the filter names and every condition of the calls it denies in part, on both arches.
(The real kernel's verdicts are the isolation tests' and the security suite's.)"""

from __future__ import annotations

import errno

import pytest

from sandbox._isolation._libc import CLONE_THREAD
from sandbox._isolation._seccomp import (
    _AUDIT_ARCH,
    _CLOCK_CALLS,
    _CLONE,
    _CLONE3,
    _COMMAND_CALLS,
    _SELF_CALLS,
    _SIGNAL_CALLS,
    _SYSCALLS,
    _WHO_CALLS,
    _X32_SYSCALL_BIT,
    build_seccomp_filter,
)

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
OWN = 4321
ARCHES = {"x86_64": 0, "aarch64": 1}


def verdict(program: list[tuple[int, int, int, int]], arch: int, nr: int, *args: int) -> int:
    """What ``program`` returns for call ``nr`` of ``arch`` with ``args`` (low 32-bit words)."""
    words = {0: nr, 4: arch}
    for index, value in enumerate(args):
        words[16 + 8 * index] = value & 0xFFFFFFFF
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x20:
            accumulator = words.get(k, 0)
        elif code == 0x06:
            return k
        else:
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[
                code
            ]
            pc += jt if taken else jf


@pytest.mark.parametrize("arch", ARCHES)
def test_the_filter_says_what_it_is_meant_to(arch: str) -> None:
    """Each denied call is EPERM, clone3 ENOSYS, clone only for threads, signals and the calls
    that name a process only for the child itself, another's CPU clock and the SIGIO owner
    commands denied; every other call allowed; a foreign arch or x32 killed."""
    program = build_seccomp_filter(arch, OWN)
    native, column = _AUDIT_ARCH[arch], ARCHES[arch]

    def check(nr: int | None, *args: int) -> int:
        assert nr is not None
        return verdict(program, native, nr, *args)

    assert verdict(program, 0x40000003, 1) == KILL  # i386
    if arch == "x86_64":
        assert check(_X32_SYSCALL_BIT | 1) == KILL
    named: set[int] = set()
    for numbers in _SYSCALLS.values():
        if numbers[column] is not None:
            assert check(numbers[column], OWN, 0) == EPERM
            named.add(numbers[column])
    assert check(_CLONE3[column]) == ENOSYS
    assert check(_CLONE[column], CLONE_THREAD | 0x100) == ALLOW
    assert check(_CLONE[column], 0x11) == EPERM
    for numbers in _SIGNAL_CALLS.values():
        assert check(numbers[column], OWN) == ALLOW
        for other in (0, -1, OWN + 1, -OWN):
            assert check(numbers[column], other) == EPERM
    for numbers in _SELF_CALLS.values():
        assert check(numbers[column], 0) == check(numbers[column], OWN) == ALLOW
        assert check(numbers[column], OWN + 1) == EPERM
    for numbers, which in _WHO_CALLS.values():
        assert check(numbers[column], which, 0) == check(numbers[column], which, OWN) == ALLOW
        assert check(numbers[column], which, OWN + 1) == EPERM
        assert check(numbers[column], which + 1, 0) == EPERM
    for numbers in _CLOCK_CALLS.values():
        for clock in (0, 1, 7, -1, -8):
            assert check(numbers[column], clock) == ALLOW
        for clock in (-9, -(1 << 20)):
            assert check(numbers[column], clock) == EPERM
    for numbers, commands in _COMMAND_CALLS.values():
        for command in commands:
            assert check(numbers[column], 3, command) == EPERM
        assert check(numbers[column], 3, 1) == ALLOW
    special = {
        _CLONE[column], _CLONE3[column],
        *(numbers[column] for numbers in _SIGNAL_CALLS.values()),
        *(numbers[column] for numbers in _SELF_CALLS.values()),
        *(numbers[column] for numbers, _ in _WHO_CALLS.values()),
        *(numbers[column] for numbers in _CLOCK_CALLS.values()),
        *(numbers[column] for numbers, _ in _COMMAND_CALLS.values()),
    }  # fmt: skip
    for nr in range(600):
        if nr not in named and nr not in special:
            assert check(nr, OWN + 1, 8) == ALLOW, nr
