"""Escape and abuse attempts against the sandbox child, each of which must be blocked.

Every attack is a script whose last expression is ``"ESCAPED"`` only if the attack worked (or
that leaves a marker file behind, for attacks that replace the process). An attack is blocked
when neither happened and the sandbox stopped it itself (the suite's own wall-clock deadline
does not count as blocking).

Modes (``disable`` of the spawn):

``full``          every layer on: every attack is blocked.
``language-off``  plain ``compile``/``exec`` with the same globals: every attack of an OS
                  category (files, network, processes, environment, resources, disk,
                  persistence, cross-run) is still blocked, by the OS layers alone.
``os-off``        rlimits, netns, pidns, uid, landlock, seccomp and quota off: every attack of
                  a language category (introspection, imports, builtins, format strings,
                  frames, generators, stdlib reflection, api arguments) is still blocked, by
                  the language layer alone.
``control``       both off, for attacks marked ``control``: the attack must *succeed*, which
                  shows that the case really attempts what it claims (a typo can't pass as a
                  block).

Hosts: every run above is made through a zygote started as the tests run (root in CI), and
every OS category's ``language-off`` and ``control`` runs again through one started as an
ordinary user (:mod:`unprivileged`), whose OS layers come from user namespaces; that
user's runs work in a directory of its own, so the files they must not reach are the user's
own. A control that can't work unprotected as an ordinary user is skipped with the reason
(:data:`USER_CONTROL_UNABLE`); the table lists it.

Layer independence (:func:`test_the_other_layer_alone`): every attack also runs with its own
category's layer off and the other one on (a language attack with the language layer off, an
OS attack with the OS layers off), to find the attacks that only one layer stops. Those are
pinned in :data:`ONE_LAYER` (and listed by name in ``SECURITY.md``): every other attack must be
blocked there too, so a layer that silently stops covering for the other fails the suite. Two
memory bombs are not run with the OS layers off (nothing else bounds memory, and they would
really take the machine's memory); they are in :data:`ONE_LAYER` by construction. The
end-of-run summary prints blocked counts per category and configuration, and this list.

Persistence attacks run a ``setup`` script first, then the attack in a fresh child; both in the
mode under test.

Disk attacks try to leave more than the run's quota (:data:`QUOTA`) on the host's disk; in
every mode but ``control`` the suite also checks that the workspace's ``out/`` holds no more
than the quota once the run is over.

Cross-run attacks aim at another run: before each, a :class:`Victim` is spawned through the same
zygote in the same mode and left waiting for its script, and the attack gets its pid (as the
host numbers it) in ``inputs["victim"]``. Such an attack also counts as escaped when the victim
was harmed: when its open-file limit, nice value, scheduling, I/O priority or CPU affinity
changed (read from ``/proc`` by the host), or it can no longer run a script to the end.
"""

from __future__ import annotations

import ctypes
import os
import platform
import secrets
import shutil
import socket
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from unprivileged import hand_to_user, user_directory

from sandbox import OS_LAYERS, BlockingChannel, ChildLimits, SpawnedChild, ZygoteProcess
from sandbox.protocol import Done, ProtocolError, Ready, RunLimits, Start
from sandbox.testing import RunRecord, run_script

LANGUAGE = (
    "introspection", "imports", "builtins", "format-strings", "frames", "generators",
    "stdlib-reflection", "api-arguments",
)  # fmt: skip
OS = (
    "files", "network", "processes", "environment", "resources", "disk", "persistence",
    "cross-run",
)  # fmt: skip

MODES: dict[str, frozenset[str]] = {
    "full": frozenset(),
    "language-off": frozenset({"restricted-python"}),
    "os-off": frozenset(OS_LAYERS),
    "control": frozenset({"restricted-python", *OS_LAYERS}),
}

# Reaches the real os, sys and builtins from plain Python (fails to compile when restricted).
P = """
for klass in ().__class__.__base__.__subclasses__():
    if klass.__name__ == "_wrap_close":
        sysmod = klass.__init__.__globals__["sys"]
        break
os = sysmod.modules["os"]
realopen = sysmod.modules["builtins"].open
socketmod = sysmod.modules["socket"]
ctypes = sysmod.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
def works(action):
    try:
        action()
        return "ESCAPED"
    except Exception as exc:
        return "blocked: " + repr(exc)
"""

# For cross-run attacks: the victim's pid, and the system calls glibc has no wrapper for, by
# number (written out here, not taken from the filter's table, so that a wrong number there
# can't hide a call here).
X = (
    P
    + """
victim = inputs["victim"]
resource = sysmod.modules["resource"]
NR = {
    "x86_64": {"kcmp": 312, "get_robust_list": 274, "sched_setattr": 314, "ioprio_set": 251,
               "ioprio_get": 252, "rt_sigqueueinfo": 129, "tgkill": 234},
    "aarch64": {"kcmp": 272, "get_robust_list": 100, "sched_setattr": 274, "ioprio_set": 30,
                "ioprio_get": 31, "rt_sigqueueinfo": 138, "tgkill": 131},
}[os.uname().machine]
libc.syscall.restype = ctypes.c_long
def sc(name, *args):
    return libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
"""
)

# For IPC attacks: a key and a queue name of this test's own (two workers run the suite at
# once), and shmat's pointer.
IPC = """
key = inputs["ipc_key"]
name = b"/scriptbridge-" + str(key).encode()
libc.shmat.restype = ctypes.c_void_p
"""

# For key attacks: add_key and keyctl by number (glibc has no wrapper; libkeyutils may be absent).
KEYS = """
NR_KEYS = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
libc.syscall.restype = ctypes.c_long
def add_key(kind, description, payload, size, keyring):
    return libc.syscall(ctypes.c_long(NR_KEYS[0]), kind, description, payload,
                        ctypes.c_long(size), ctypes.c_long(keyring))
def keyctl(operation, *args):  # each of args an int, or a buffer
    return libc.syscall(ctypes.c_long(NR_KEYS[1]), ctypes.c_long(operation),
                        *[ctypes.c_long(a) if a.__class__ is int else a for a in args])
"""


@dataclass(frozen=True)
class Attack:
    """One attempt: its category, its script, an optional setup run, and whether the attack
    must succeed with every layer off (``control``)."""

    name: str
    category: str
    source: str
    control: bool = True
    setup: str | None = None
    unsafe_alone: bool = False
    """Not run with its own layer off: unstopped, it would really harm the machine."""


def attack(name: str, category: str, source: str, **kwargs: Any) -> Attack:
    """Build an :class:`Attack`; ``category`` must be one of LANGUAGE or OS."""
    assert category in LANGUAGE + OS, category
    return Attack(name, category, source, **kwargs)


ATTACKS = [
    # ---------------------------------------------------------------- introspection
    attack(
        "subclasses-walk",
        "introspection",
        "found = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen']\n"
        "'ESCAPED' if found else 'no'",
    ),
    attack("mro-to-object", "introspection", "'ESCAPED' if len(str.mro()) == 2 else 'no'"),
    attack(
        "function-globals",
        "introspection",
        "'ESCAPED' if 'os' in call_tool.__globals__ else 'no'",
    ),
    attack(
        "closure-cells",
        "introspection",
        "'ESCAPED' if tools.docs_search.__closure__[0].cell_contents else 'no'",
    ),
    attack(
        "bound-method-self",
        "introspection",
        "'ESCAPED' if read_text.__self__._channel else 'no'",
    ),
    attack(
        "print-self",
        "introspection",
        "'ESCAPED' if print.__self__ is not None else 'no'",
    ),
    attack(
        "class-of-inputs",
        "introspection",
        "'ESCAPED' if inputs.__class__.__base__.__subclasses__() else 'no'",
    ),
    attack(
        "exception-class-init",
        "introspection",
        "'ESCAPED' if ToolError.__init__.__objclass__ else 'no'",
    ),
    attack(
        "tools-namespace-internals",
        "introspection",
        "'ESCAPED' if tools._callables else 'no'",
    ),
    attack(
        "proxy-internals",
        "introspection",
        "import json\n'ESCAPED' if json._attributes else 'no'",
    ),
    attack(
        "func-globals-py2-name",
        "introspection",
        "f = lambda: 1\n'ESCAPED' if f.func_globals is not None else 'no'",
        control=False,  # a Python 2 spelling: no such attribute anywhere
    ),
    # ---------------------------------------------------------------- imports
    attack("import-os", "imports", "import os\n'ESCAPED'", control=False),
    attack("import-sys", "imports", "import sys\n'ESCAPED'", control=False),
    attack("import-subprocess", "imports", "import subprocess\n'ESCAPED'", control=False),
    attack("import-ctypes", "imports", "import ctypes\n'ESCAPED'", control=False),
    attack("import-importlib", "imports", "import importlib\n'ESCAPED'", control=False),
    attack("import-builtins", "imports", "import builtins\n'ESCAPED'", control=False),
    attack("import-submodule", "imports", "import json.decoder\n'ESCAPED'", control=False),
    attack(
        "from-import-submodule",
        "imports",
        "from json import decoder\n'ESCAPED'",
        control=False,
    ),
    attack(
        "module-attribute-sys",
        "imports",
        "import statistics\n'ESCAPED' if statistics.sys else 'no'",
        control=False,
    ),
    attack(
        "module-attribute-binascii",
        "imports",
        "import base64\n'ESCAPED' if base64.binascii else 'no'",
        control=False,
    ),
    attack(
        "from-import-module-attribute",
        "imports",
        "from textwrap import re\n'ESCAPED'",
        control=False,
    ),
    attack(
        "dunder-import",
        "imports",
        "m = __import__('os')\n'ESCAPED'",
        control=False,
    ),
    attack(
        "real-module-through-proxy",
        "imports",
        "import random\n'ESCAPED' if random._os else 'no'",
        control=False,
    ),
    # ---------------------------------------------------------------- builtins
    attack("type", "builtins", "'ESCAPED' if type(1) else 'no'", control=False),
    attack("getattr", "builtins", "'ESCAPED' if getattr(1, 'real') == 1 else 'no'", control=False),
    attack("globals", "builtins", "'ESCAPED' if globals()['_getattr_'] else 'no'", control=False),
    attack("vars-and-dir", "builtins", "'ESCAPED' if vars() or dir() else 'no'", control=False),
    attack("eval", "builtins", "'ESCAPED' if eval('1') == 1 else 'no'", control=False),
    attack("exec", "builtins", "exec('x = 1')\n'ESCAPED'", control=False),
    attack("compile", "builtins", "compile('1', 'x', 'eval')\n'ESCAPED'", control=False),
    attack("open", "builtins", "open('/etc/passwd')\n'ESCAPED'", control=False),
    attack("builtins-dict", "builtins", "__builtins__['open']\n'ESCAPED'", control=False),
    attack(
        "object-and-super",
        "builtins",
        "'ESCAPED' if object.__subclasses__() else 'no'",
        control=False,
    ),
    attack("breakpoint-help-input", "builtins", "breakpoint()\n'ESCAPED'", control=False),
    attack("memoryview", "builtins", "memoryview(b'x')\n'ESCAPED'", control=False),
    # ---------------------------------------------------------------- format strings
    attack(
        "format-attribute-walk",
        "format-strings",
        "s = '{0.__class__.__mro__}'.format(1)\n'ESCAPED' if 'object' in s else 'no'",
    ),
    attack(
        "format-function-globals",
        "format-strings",
        "s = '{0.__globals__}'.format(call_tool)\n'ESCAPED' if 'module' in s else 'no'",
    ),
    attack(
        "format-map",
        "format-strings",
        "s = '{a.__globals__}'.format_map({'a': tools.docs_search})\n"
        "'ESCAPED' if 'module' in s else 'no'",
    ),
    attack(
        "format-through-the-type",
        "format-strings",
        "s = str.format('{0.__class__}', 1)\n'ESCAPED' if 'int' in s else 'no'",
    ),
    attack(
        "f-string-attribute",
        "format-strings",
        "s = f'{call_tool.__globals__}'\n'ESCAPED' if 'module' in s else 'no'",
    ),
    attack(
        "string-formatter",
        "format-strings",
        "import string\ns = string.Formatter().format('{0.__class__}', 1)\n'ESCAPED'",
        control=False,  # Formatter is not in the proxy, whichever compiler runs
    ),
    # ---------------------------------------------------------------- frames and tracebacks
    attack(
        "traceback-frame-globals",
        "frames",
        "try:\n    1 / 0\nexcept Exception as e:\n"
        "    g = e.__traceback__.tb_frame.f_back.f_globals\n"
        "'ESCAPED' if 'os' in g else 'no'",
    ),
    attack(
        "tool-error-traceback",
        "frames",
        "try:\n    call_tool('nope', {})\nexcept ToolError as e:\n    tb = e.__traceback__\n"
        "    while tb.tb_next:\n        tb = tb.tb_next\n"
        "    found = tb.tb_frame.f_globals\n'ESCAPED' if 'os' in found else 'no'",
    ),
    attack(
        "exception-context",
        "frames",
        "try:\n    try:\n        1 / 0\n    except Exception:\n        raise ValueError('x')\n"
        "except ValueError as e:\n    c = e.__context__.__traceback__.tb_frame\n'ESCAPED'",
    ),
    attack(
        "traceback-without-dunder",
        "frames",
        "def f():\n    yield 1\ng = f()\nnext(g)\n"
        "'ESCAPED' if g.gi_frame.f_globals['call_tool'] else 'no'",
    ),
    # ---------------------------------------------------------------- generators, coroutines
    attack(
        "generator-frame",
        "generators",
        "g = (x for x in [1])\n'ESCAPED' if g.gi_frame is not None else 'no'",
    ),
    attack(
        "generator-code",
        "generators",
        "def f():\n    yield 1\n'ESCAPED' if f().gi_code.co_consts is not None else 'no'",
    ),
    attack(
        "generator-frame-locals",
        "generators",
        "g = (x for x in [1])\n'ESCAPED' if g.gi_frame.f_locals is not None else 'no'",
    ),
    attack(
        "yield-from-target",
        "generators",
        "def inner():\n    yield 1\ndef outer():\n    yield from inner()\n"
        "g = outer()\nnext(g)\n'ESCAPED' if g.gi_yieldfrom is not None else 'no'",
    ),
    attack(
        "coroutine-frame",
        "generators",
        "async def f():\n    pass\nc = f()\nok = c.cr_frame is not None\nc.close()\n"
        "'ESCAPED' if ok else 'no'",
    ),
    attack(
        "async-generator-frame",
        "generators",
        "async def f():\n    yield 1\n'ESCAPED' if f().ag_frame is not None else 'no'",
    ),
    # the async dialect (sandbox._dialect): no coroutine, event loop or thread to reach
    attack(
        "dialect-gather-globals",
        "generators",
        "import asyncio\ng = asyncio.gather\n'ESCAPED' if g.__globals__ is not None else 'no'",
    ),
    attack(
        "dialect-return-traceback",
        "generators",
        "try:\n    return 1\nexcept Exception.__base__ as stop:\n"
        "    f = stop.__traceback__.tb_frame\n"
        "'ESCAPED' if f.f_globals is not None else 'no'",
    ),
    attack(
        "dialect-event-loop",
        "generators",
        "import asyncio\nloop = asyncio.get_event_loop()\nawait asyncio.sleep(0)\n"
        "'ESCAPED' if loop is not None else 'no'",
        control=False,  # the dialect's asyncio has no loop to give, layers on or off
    ),
    attack(
        "dialect-forged-pending-call",
        "generators",
        "first = call_tool('docs.search', {})\nforged = type(first)(1, 2, 'docs.search', {})\n"
        "await forged\n'ESCAPED'",
        control=False,  # only the session makes pending calls, layers on or off
    ),
    attack(
        "dialect-awaited-coroutine-frame",
        "generators",
        "async def inner():\n    return 1\nasync def outer():\n    c = inner()\n"
        "    return c.cr_frame\nframe = await outer()\n"
        "'ESCAPED' if frame is not None and frame.f_globals is not None else 'no'",
        control=False,  # plain Python runs no awaited coroutine without an event loop
    ),
    # ---------------------------------------------------------------- stdlib reflection
    # Allowlisted callables that read or write attributes whose names the caller chooses
    # (functools.wraps is update_wrapper: the real getattr/setattr, past every guard), or that
    # hand out a function's internals.
    attack(
        "wraps-merges-module-globals",
        "stdlib-reflection",
        "import functools, json\ndef f():\n    pass\n"
        "functools.wraps(json.dumps, assigned=(), updated=('__globals__',))(f)\n"
        "def g():\n    return getattr\n"
        "'ESCAPED' if g()(1, '__class__') is int else 'no'",
    ),
    attack(
        "wraps-swaps-a-stdlib-function-code",
        "stdlib-reflection",
        "import functools, statistics\ndef evil(*args):\n    return sys\n"
        "functools.wraps(evil, assigned=('__code__',), updated=())"
        "(statistics.mean)\n"
        "'ESCAPED' if repr(statistics.mean([1])).startswith(\"<module 'sys'\") else 'no'",
    ),
    attack(
        "wraps-makes-a-stdlib-class-writable",
        "stdlib-reflection",
        "import functools, fractions\ndef f():\n    pass\n"
        "functools.wraps(f, assigned=('__module__',), updated=())"
        "(fractions.Fraction)\n"
        "fractions.Fraction.limit_denominator = lambda self, m=0: 'patched'\n"
        "'ESCAPED' if fractions.Fraction(1, 3).limit_denominator() == 'patched' else 'no'",
    ),
    attack(
        "wraps-hands-out-update-wrapper",
        "stdlib-reflection",
        "import functools, json\nupdate = functools.wraps(len).func\n"
        "def f():\n    pass\n"
        "update(f, json.dumps, assigned=(), updated=('__globals__',))\n"
        "def g():\n    return getattr\n"
        "'ESCAPED' if g()(1, '__class__') is int else 'no'",
    ),
    attack(
        "wraps-renames-a-stdlib-function",
        "stdlib-reflection",
        "import functools, textwrap\ndef shadow(text):\n    return 'x'\n"
        "functools.wraps(shadow)(textwrap.dedent)\n"
        "'ESCAPED' if 'shadow' in repr(textwrap.dedent) else 'no'",
    ),
    attack(
        "function-attribute-write-on-stdlib",
        "stdlib-reflection",
        "import textwrap\ntextwrap.dedent.planted = 1\n"
        "'ESCAPED' if textwrap.dedent.planted == 1 else 'no'",
    ),
    attack(
        "unbound-method-hands-out-type",
        "stdlib-reflection",
        "import collections\nT = collections.Counter.copy(int)\n"
        "'ESCAPED' if T(1) is int and T(int) is T else 'no'",
    ),
    attack(
        "unbound-method-of-a-subclass",
        "stdlib-reflection",
        "import collections\nclass C(collections.Counter):\n    pass\n"
        "T = C.copy(int)\n'ESCAPED' if T(1) is int and T(int) is T else 'no'",
    ),
    attack(
        "class-property-hands-out-its-getter",
        "stdlib-reflection",
        "import fractions\ngetter = fractions.Fraction.numerator.fget\n"
        "'ESCAPED' if getter(fractions.Fraction(3, 4)) == 3 else 'no'",
    ),
    attack(
        "nested-class-adopts-a-stdlib-class",
        "stdlib-reflection",
        "import collections, fractions\nT = collections.Counter.copy(int)\n"
        "M = T('M', (T,), {'__prepare__': lambda *a, **k: "
        "{'__metaclass__': lambda *b: fractions.Fraction}})\n"
        "B = M('B', (), {})\nclass Outer(B):\n    class Inner:\n        pass\n"
        "fractions.Fraction.limit_denominator = lambda self, m=0: 'patched'\n"
        "'ESCAPED' if fractions.Fraction(1, 3).limit_denominator() == 'patched' else 'no'",
    ),
    # ---------------------------------------------------------------- api arguments
    # Script objects handed to the script API: trusted helpers must read them as exact builtin
    # types, never through the script's own methods.
    attack(
        "str-subclass-steers-read-bytes",
        "api-arguments",
        "class Part(str):\n    def __eq__(self, other):\n        return other == 'refs'\n"
        "    def __ne__(self, other):\n        return other != 'refs'\n"
        "class Path(str):\n    def split(self, sep=None, maxsplit=-1):\n"
        "        return [Part(inputs['package']), '_guards.py']\n"
        "    def startswith(self, *args):\n        return False\n"
        "data = read_bytes(Path('refs/note.txt'))\n"
        "'ESCAPED' if b'def guarded_getattr' in data else 'no'",
        control=False,  # the runtime's own boundary, on in every mode (red before the fix)
    ),
    attack(
        "str-subclass-steers-read-text",
        "api-arguments",
        "class Part(str):\n    def __eq__(self, other):\n        return other in ('refs', 'out')\n"
        "    def __ne__(self, other):\n        return other not in ('refs', 'out')\n"
        "class Path(str):\n    def split(self, sep=None, maxsplit=-1):\n"
        "        return [Part(inputs['package']), '_runtime.py']\n"
        "    def startswith(self, *args):\n        return False\n"
        "    def __contains__(self, item):\n        return False\n"
        "data = read_text(Path('out/x'))\n"
        "'ESCAPED' if 'def serve' in data else 'no'",
        control=False,  # the runtime's own boundary, on in every mode (red before the fix)
    ),
    attack(
        "str-subclass-steers-write-text",
        "api-arguments",
        "class Part(str):\n    def __eq__(self, other):\n        return other == 'out'\n"
        "    def __ne__(self, other):\n        return other != 'out'\n"
        "class Path(str):\n    def split(self, sep=None, maxsplit=-1):\n"
        "        return [Part(inputs['scratch']), 'planted.txt']\n"
        "    def startswith(self, *args):\n        return False\n"
        "write_text(Path('nowhere.txt'), 'x')\n'ESCAPED'",
        control=False,  # write_text checks twice; the second check never held a subclass
    ),
    attack(
        "parts-subclass-dot-dot",
        "api-arguments",
        "class Dots(str):\n    def __eq__(self, other):\n        return False\n"
        "    def __ne__(self, other):\n        return True\n"
        "class Path(str):\n    def split(self, sep=None, maxsplit=-1):\n"
        "        return ['refs', Dots('..'), Dots('..'), 'secret.txt']\n"
        "data = read_text(Path('refs/note.txt'))\n"
        "'ESCAPED' if data == 'top secret' else 'no'",
        control=False,  # the realpath check held this one; kept so it keeps holding
    ),
    # ---------------------------------------------------------------- files
    attack(
        "read-etc-passwd",
        "files",
        P + "'ESCAPED' if 'root:' in realopen('/etc/passwd').read() else 'no'",
    ),
    attack(
        "read-host-secret",
        "files",
        P + "'ESCAPED' if realopen(inputs['secret']).read() == 'top secret' else 'no'",
    ),
    attack(
        "write-outside-workspace",
        "files",
        P + "works(lambda: realopen(inputs['outside'], 'w').write('x'))",
    ),
    attack("write-into-refs", "files", P + "works(lambda: realopen('refs/new', 'w').write('x'))"),
    attack("list-root", "files", P + "'ESCAPED' if 'etc' in os.listdir('/') else 'no'"),
    attack("list-workspace-parent", "files", P + "works(lambda: os.listdir('..'))"),
    attack(
        "symlink-then-read-text",
        "files",
        P + "os.symlink('/etc/passwd', 'out/link')\n"
        "'ESCAPED' if 'root:' in read_text('out/link') else 'no'",
        control=False,  # read_text refuses the link even unprotected
    ),
    attack(
        "hardlink-into-out",
        "files",
        P + "works(lambda: os.link(inputs['secret'], 'out/stolen'))",
    ),
    attack(
        "zygote-memory",
        "files",
        P + "works(lambda: realopen(f'/proc/{os.getppid()}/mem', 'rb').read(0))",
    ),
    attack(
        "zygote-memory-by-its-pid",
        "files",
        # the zygote by the pid the host knows it by (getppid() says 0 in a PID namespace)
        P + "works(lambda: realopen(f\"/proc/{inputs['zygote']}/mem\", 'rb').read(0))",
    ),
    # Metadata and watches, which landlock's file rights don't cover: as an ordinary user a
    # child is that user on the host, the owner of every file of the user's (seccomp denies
    # every call that changes a file's mode, owner, times or extended attributes, and inotify).
    attack(
        "setuid-bit-on-a-host-file",
        "files",
        P + "works(lambda: os.chmod(inputs['secret'], 0o4755))",
    ),
    attack(
        "group-of-a-host-file",
        "files",
        P + "info = os.stat(inputs['secret'])\n"
        "works(lambda: os.chown(inputs['secret'], info.st_uid, info.st_gid))",
    ),
    attack(
        "times-of-a-host-file",
        "files",
        P + "works(lambda: os.utime(inputs['secret'], (0, 0)))",
    ),
    attack(
        "xattr-on-a-host-file",
        "files",
        P + "works(lambda: os.setxattr(inputs['secret'], 'user.planted', b'1'))",
    ),
    attack(
        "fchmodat2-on-a-host-file",
        "files",
        # the newest spelling of chmod (Linux 6.6), by number: glibc 2.36 has no wrapper
        P + "libc.syscall.restype = ctypes.c_long\n"
        "works(lambda: libc.syscall(ctypes.c_long(452), ctypes.c_long(-100),"
        " inputs['secret'].encode(), ctypes.c_long(0o4755), ctypes.c_long(0)) == 0 or 1 / 0)",
    ),
    attack(
        "watch-a-host-file",
        "files",
        P + "fd = libc.inotify_init1(0)\n"
        "'ESCAPED' if libc.inotify_add_watch(fd, inputs['secret'].encode(), 0xFFF) >= 0 else 'no'",
    ),
    attack(
        "inode-flags-on-a-ref",
        "files",
        # an inode flag (nodump) on a saved payload, through the read-only fd landlock allows
        # (FS_IOC_SETFLAGS wants the file's owner, not a writable fd); the flags are put back
        P + "fcntl = sysmod.modules['fcntl']\narray = sysmod.modules['array']\n"
        "fd = os.open('refs/note.txt', os.O_RDONLY)\nflags = array.array('l', [0])\n"
        "fcntl.ioctl(fd, 0x80086601, flags, True)\n"  # FS_IOC_GETFLAGS
        "before = flags[0]\nflags[0] |= 0x40\n"  # FS_NODUMP_FL
        "def mark():\n    fcntl.ioctl(fd, 0x40086602, flags, True)\n"  # FS_IOC_SETFLAGS
        "    flags[0] = before\n    fcntl.ioctl(fd, 0x40086602, flags, True)\n"
        "works(mark)",
    ),
    attack(
        "lease-on-a-ref",
        "files",
        # a lease on a saved payload, through the read-only fd landlock allows (F_SETLEASE wants
        # the file's owner): whoever opens it for writing (for anything, a write lease) then
        # waits for the child, up to lease-break-time; let go after
        P + "fcntl = sysmod.modules['fcntl']\nfd = os.open('refs/note.txt', os.O_RDONLY)\n"
        "def lease():\n    fcntl.fcntl(fd, 1024, 0)\n"  # F_SETLEASE, F_RDLCK
        "    fcntl.fcntl(fd, 1024, 2)\n"  # F_UNLCK
        "works(lease)",
    ),
    attack(
        "api-path-traversal",
        "files",
        "'ESCAPED' if read_text('refs/../../secret.txt') else 'no'",
        control=False,  # the runtime's own check, on in every mode
    ),
    attack(
        "api-write-outside-out",
        "files",
        "write_text('out/../escape.txt', 'x')\n'ESCAPED'",
        control=False,
    ),
    # ---------------------------------------------------------------- network
    attack(
        "tcp-connect-host-loopback",
        "network",
        P + "s = socketmod.socket(socketmod.AF_INET, socketmod.SOCK_STREAM)\n"
        "works(lambda: s.connect(('127.0.0.1', inputs['port'])))",
    ),
    attack(
        "udp-send",
        "network",
        P + "s = socketmod.socket(socketmod.AF_INET, socketmod.SOCK_DGRAM)\n"
        "works(lambda: s.sendto(b'x', ('127.0.0.1', inputs['port'])))",
    ),
    attack("unix-socketpair", "network", P + "works(lambda: socketmod.socketpair())"),
    attack(
        "listen-backdoor",
        "network",
        P + "works(lambda: socketmod.create_server(('0.0.0.0', 0)))",
    ),
    attack(
        "raw-packet-socket",
        "network",
        P + "works(lambda: socketmod.socket(socketmod.AF_PACKET, socketmod.SOCK_RAW))",
    ),
    # ---------------------------------------------------------------- processes
    attack(
        "fork",
        "processes",
        P + "def fork():\n    if os.fork() == 0:\n        os._exit(0)\nworks(fork)",
    ),
    attack(
        "subprocess",
        "processes",
        P + "subprocess = sysmod.modules['subprocess']\n"
        "works(lambda: subprocess.run(['/bin/true'], check=True))",
    ),
    attack(
        "exec-shell",
        "processes",
        P + "os.execv('/bin/sh', ['sh', '-c', 'echo pwned > ' + inputs['marker']])",
    ),
    attack(
        "posix-spawn",
        "processes",
        P + "works(lambda: os.posix_spawn('/bin/true', ['true'], {}))",
    ),
    attack(
        "signal-the-zygote",
        "processes",
        P + "works(lambda: os.kill(inputs['zygote'], 0))",
    ),
    attack(
        "read-zygote-memory-vm",
        "processes",
        P + "class Iovec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(8)\n"
        "local = Iovec(ctypes.addressof(buf), 8)\nremote = Iovec(id(None), 8)\n"
        "n = libc.process_vm_readv(inputs['zygote'], ctypes.byref(local), 1, "
        "ctypes.byref(remote), 1, 0)\n'ESCAPED' if n == 8 else 'no'",
    ),
    attack(
        "ptrace-seize-zygote",
        "processes",
        P + "'ESCAPED' if libc.ptrace(0x4206, inputs['zygote'], 0, 0) == 0 else 'no'",
        control=False,  # would really attach to the shared zygote
    ),
    attack(
        "new-user-namespace",
        "processes",
        P + "'ESCAPED' if libc.unshare(0x10000000) == 0 else 'no'",
    ),
    attack(
        "capset-every-capability",
        "processes",
        # every capability, then those of the bounding set (root's may be narrowed, as in a
        # container); effective and permitted, of the two 32-bit words
        P + "header = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"  # _LINUX_CAPABILITY_VERSION_3
        "bound = [sum(1 << c for c in range(32) if libc.prctl(23, 32 * w + c, 0, 0, 0) == 1)"
        " for w in (0, 1)]\n"  # PR_CAPBSET_READ
        "for low, high in ((0xFFFFFFFF, 0xFFFFFFFF), bound):\n"
        "    if libc.capset(header, (ctypes.c_uint32 * 6)(low, low, 0, high, high, 0)) == 0:\n"
        "        break\n"
        "held = (ctypes.c_uint32 * 6)()\nlibc.capget(header, held)\n"
        "'ESCAPED' if held[0] or held[3] else 'no'",  # any effective capability
    ),
    attack(
        "mount-a-tmpfs-over-out",
        "processes",
        P + "mounted = libc.mount(b'none', b'out', b'tmpfs', 0, None) == 0\n"
        "if mounted:\n    libc.umount2(b'out', 2)\n"  # MNT_DETACH: leave nothing mounted
        "'ESCAPED' if mounted else 'no'",
    ),
    attack(
        "oom-score-of-the-zygote",
        "processes",
        # the zygote's oom_score_adj written (its own value again: nothing changes), through the
        # host's /proc, where a PID namespace hides no one; as an ordinary user the zygote is
        # the child's user, whose files those are: only landlock keeps it out there
        P + "path = f\"/proc/{inputs['zygote']}/oom_score_adj\"\n"
        "score = realopen(path).read().strip()\n"
        "works(lambda: realopen(path, 'w').write(score))",
    ),
    # ---------------------------------------------------------------- environment
    attack(
        "environ-of-the-host-test",
        "environment",
        P + "'ESCAPED' if os.environ.get('SCRIPTBRIDGE_SUITE_SECRET') else 'no'",
        control=False,  # the zygote starts with an empty environment, whatever the layers
    ),
    attack(
        "proc-environ-of-the-host",
        "environment",
        P + "data = realopen(f\"/proc/{inputs['host']}/environ\", 'rb').read()\n"
        "'ESCAPED' if b'PATH=' in data else 'no'",
    ),
    attack(
        "proc-maps-of-the-host",
        "environment",
        P + "data = realopen(f\"/proc/{inputs['host']}/maps\").read()\n"
        "'ESCAPED' if 'python' in data else 'no'",
    ),
    attack(
        "proc-cmdline-of-the-host",
        "environment",
        P + "data = realopen(f\"/proc/{inputs['host']}/cmdline\", 'rb').read()\n"
        "'ESCAPED' if data else 'no'",
    ),
    # ---------------------------------------------------------------- resources
    attack("cpu-loop", "resources", "while True:\n    pass\n'ESCAPED'", control=False),
    attack(
        "memory-bomb",
        "resources",
        "x = bytearray(2 ** 34)\n'ESCAPED'",
        control=False,
        unsafe_alone=True,  # 16 GiB, zero-filled
    ),
    attack(
        "string-memory-bomb",
        "resources",
        "x = 'a' * 2 ** 31\n'ESCAPED'",
        control=False,
        unsafe_alone=True,  # 2 GiB
    ),
    attack(
        "deep-recursion",
        "resources",
        "def f(n):\n    return f(n + 1)\nf(0)\n'ESCAPED'",
        control=False,
    ),
    attack(
        "c-stack-recursion",
        "resources",
        P + "sysmod.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1)\nf(0)\n'ESCAPED'",
        control=False,
    ),
    attack(
        "output-flood",
        "resources",
        "while True:\n    print('x' * 65536)\n'ESCAPED'",
        control=False,
    ),
    attack(
        "output-flood-on-the-raw-channel",
        "resources",
        P + "msgpack = sysmod.modules['msgpack']\n"
        "body = msgpack.packb({'op': 'output', 'text': 'x' * 60000})\n"
        "frame = len(body).to_bytes(4, 'big') + body\n"
        "fds = [fd for fd in range(3, 16) if works(lambda: os.fstat(fd)) == 'ESCAPED']\n"
        "for i in range(1000):\n    os.write(fds[-1], frame)\n'ESCAPED'",
        control=False,
    ),
    attack(
        "fd-exhaustion",
        "resources",
        P + "fds = []\ndef grab():\n    while len(fds) < 100000:\n        fds.append(os.dup(0))\n"
        "works(grab)",
        control=False,
    ),
    attack(
        "sysv-shared-memory-past-the-memory-limit",
        "resources",
        # 512 MiB (twice memory_mb) in segments each attached, filled and detached in turn, so
        # the address space never holds more than one; then each checked still there (attached
        # again), and removed, so a control leaves nothing
        P + "libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]\n"
        "libc.shmat.restype = ctypes.c_void_p\nlibc.shmdt.argtypes = [ctypes.c_void_p]\n"
        "size = 128 * 2 ** 20\nfailed = ctypes.c_void_p(-1).value\nheld = []\n"
        "for i in range(4):\n"
        "    sid = libc.shmget(0, size, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT
        "    addr = libc.shmat(sid, None, 0) if sid >= 0 else failed\n"
        "    if addr in (None, failed):\n        break\n"
        "    ctypes.memset(addr, 1, size)\n    libc.shmdt(addr)\n    held.append(sid)\n"
        "kept = 0\nfor sid in held:\n"
        "    addr = libc.shmat(sid, None, 0)\n"
        "    if addr not in (None, failed):\n"
        "        kept += ctypes.string_at(addr + size - 1, 1) == b'\\x01'\n"
        "        libc.shmdt(addr)\n"
        "    libc.shmctl(sid, 0, None)\n"  # IPC_RMID
        "'ESCAPED' if kept == 4 else 'no'",
    ),
    attack(
        "queued-signals-from-the-users-share",
        "resources",
        # a thousand real-time signals queued to itself, blocked: each takes one of its uid's
        # pending signals (RLIMIT_SIGPENDING), which for an ordinary user's child is the user's
        # share, the host's and every run's (their sigqueue and timer_create fail with EAGAIN)
        P + "signal = sysmod.modules['signal']\nsig = signal.SIGRTMIN + 3\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {sig})\n"
        "info = (ctypes.c_int * 32)(sig, 0, -1)\n"  # si_code SI_QUEUE
        "libc.syscall.restype = ctypes.c_long\n"
        "number = {'x86_64': 129, 'aarch64': 138}[os.uname().machine]\n"  # rt_sigqueueinfo
        "queued = 0\nfor i in range(1000):\n"
        "    if libc.syscall(ctypes.c_long(number), ctypes.c_long(os.getpid()),"
        " ctypes.c_long(sig), info) != 0:\n"
        "        break\n    queued += 1\n"
        "'ESCAPED' if queued == 1000 else 'no'",
    ),
    attack(
        "sysv-messages-past-the-memory-limit",
        "resources",
        # 320 MiB (more than memory_mb) of kernel memory in message queues of its IPC namespace
        # (msgmni queues of msgmnb bytes each there); each queue removed after, so a control
        # leaves nothing
        P + "buf = ctypes.create_string_buffer(b'\\x01' + bytes(7) + b'x' * 8192, 8200)\n"
        "queued = 0\nmade = []\nfor i in range(21000):\n"
        "    q = libc.msgget(0, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT
        "    if q < 0:\n        break\n    made.append(q)\n"
        "    for j in range(2):\n"
        "        queued += libc.msgsnd(q, buf, 8192, 0o4000) == 0\n"  # IPC_NOWAIT
        "held = queued * 8192\nfor q in made:\n    libc.msgctl(q, 0, None)\n"  # IPC_RMID
        "'ESCAPED' if held >= 320 * 2 ** 20 else 'no'",
    ),
    attack(
        "memfds-past-the-memory-limit",
        "resources",
        # 384 MiB (more than memory_mb) written to memfds, never mapped: each within
        # RLIMIT_FSIZE, as many as the open-file limit allows
        P + "fds = []\nchunk = b'x' * 2 ** 20\nfor i in range(48):\n"
        "    fd = libc.memfd_create(b'held', 0)\n    if fd < 0:\n        break\n"
        "    for j in range(8):\n        os.write(fd, chunk)\n    fds.append(fd)\n"
        "held = sum(os.fstat(fd).st_size for fd in fds)\n"
        "'ESCAPED' if held >= 384 * 2 ** 20 else 'no'",
    ),
    attack(
        "tool-call-flood",
        "resources",
        "for i in range(100000):\n    call_tool('docs.search', {})\n'ESCAPED'",
        control=False,
    ),
    # ---------------------------------------------------------------- disk
    attack(
        "disk-fill",
        "disk",
        "write_text('out/big.txt', 'x' * (40 * 2 ** 20))\n'ESCAPED'",
        control=False,
    ),
    attack(
        "many-small-files",
        "disk",
        P + "def fill():\n    for i in range(300):\n"
        "        os.close(os.open(f'out/f{i}', os.O_CREAT | os.O_WRONLY))\nworks(fill)",
    ),
    attack(
        "one-large-file",
        "disk",
        P + "fd = os.open('out/big', os.O_CREAT | os.O_WRONLY)\ndef fill():\n"
        "    for i in range(24):\n        assert os.write(fd, b'x' * 2 ** 20) == 2 ** 20\n"
        "works(fill)",
    ),
    attack(
        "nested-directories",
        "disk",
        P + "def nest():\n    path = 'out'\n    for i in range(300):\n        path += '/d'\n"
        "        os.mkdir(path)\nworks(nest)",
    ),
    attack(
        "sparse-ftruncate",
        "disk",
        P + "fd = os.open('out/sparse', os.O_CREAT | os.O_WRONLY)\n"
        "works(lambda: os.ftruncate(fd, 2 ** 40))",
    ),
    attack(
        "fallocate-past-the-end",
        "disk",
        P + "fd = os.open('out/held', os.O_CREAT | os.O_WRONLY)\n"
        "keep_size = 1\nsize = ctypes.c_long(32 * 2 ** 20)\n"
        "'ESCAPED' if libc.fallocate(fd, keep_size, ctypes.c_long(0), size) == 0 else 'no'",
    ),
    attack(
        "hard-link-flood",
        "disk",
        P + "fd = os.open('out/data', os.O_CREAT | os.O_WRONLY)\nos.write(fd, b'x' * 2 ** 20)\n"
        "def link():\n    for i in range(300):\n        os.link('out/data', f'out/l{i}')\n"
        "works(link)",
    ),
    # ---------------------------------------------------------------- cross-run
    # Another run's child, by its pid: its limits, priorities and CPUs, signals, its memory and
    # descriptors, its /proc entries. Every signal sent here is 0 (a probe), and every change
    # lands on the victim alone, so the controls harm nothing else on the machine.
    attack(
        "lower-its-open-files",
        "cross-run",
        X + "works(lambda: resource.prlimit(victim, resource.RLIMIT_NOFILE, (16, 16)))",
    ),
    attack(
        "read-its-limits",
        "cross-run",
        X + "works(lambda: resource.prlimit(victim, resource.RLIMIT_NOFILE))",
    ),
    attack(
        "renice-it",
        "cross-run",
        X + "works(lambda: os.setpriority(os.PRIO_PROCESS, victim, 19))",
    ),
    attack(
        "renice-its-process-group",
        "cross-run",
        X + "works(lambda: os.setpriority(os.PRIO_PGRP, victim, 19))",
    ),
    attack(
        "read-its-nice-value",
        "cross-run",
        X + "works(lambda: os.getpriority(os.PRIO_PROCESS, victim))",
    ),
    attack(
        "pin-it-to-one-cpu",
        "cross-run",
        X + "works(lambda: os.sched_setaffinity(victim, {min(os.sched_getaffinity(0))}))",
    ),
    attack(
        "read-its-affinity",
        "cross-run",
        X + "works(lambda: os.sched_getaffinity(victim))",
    ),
    attack(
        "idle-scheduling-for-it",
        "cross-run",
        X + "works(lambda: os.sched_setscheduler(victim, os.SCHED_IDLE, os.sched_param(0)))",
    ),
    attack(
        "read-its-scheduling",
        "cross-run",
        X + "works(lambda: os.sched_getscheduler(victim))",
    ),
    attack(
        "sched-setattr-nice",
        "cross-run",
        X + "attr = (ctypes.c_uint32 * 12)(48, 0, 0, 0, 19)\n"
        "'ESCAPED' if sc('sched_setattr', victim, ctypes.addressof(attr), 0) == 0 else 'no'",
    ),
    attack(
        "idle-io-priority-for-it",
        "cross-run",
        X + "'ESCAPED' if sc('ioprio_set', 1, victim, 3 << 13) == 0 else 'no'",
    ),
    attack(
        "read-its-io-priority",
        "cross-run",
        X + "'ESCAPED' if sc('ioprio_get', 1, victim) >= 0 else 'no'",
    ),
    attack(
        "probe-it-with-signal-0",
        "cross-run",
        X + "works(lambda: os.kill(victim, 0))",
    ),
    attack(
        "signal-every-process-it-may",
        "cross-run",
        X + "works(lambda: os.kill(-1, 0))",  # 0 if there is any other process it can see
    ),
    attack(
        "signal-its-process-group",
        "cross-run",
        X + "works(lambda: os.kill(-victim, 0))",
    ),
    attack(
        "tgkill-it",
        "cross-run",
        X + "'ESCAPED' if sc('tgkill', victim, victim, 0) == 0 else 'no'",
    ),
    attack(
        "queue-a-signal-for-it",
        "cross-run",
        X + "info = (ctypes.c_int * 32)(0, 0, -1)\n"  # si_code SI_QUEUE
        "'ESCAPED' if sc('rt_sigqueueinfo', victim, 0, ctypes.addressof(info)) == 0 else 'no'",
    ),
    attack(
        "sigio-to-it",
        "cross-run",
        X + "r, w = os.pipe()\nowned = libc.fcntl(r, 8, victim)\n"  # F_SETOWN
        "libc.fcntl(r, 4, os.O_ASYNC | os.O_NONBLOCK)\n"  # F_SETFL
        "os.write(w, b'x')\n'sent' if owned == 0 else 'no'",  # SIGIO kills, if it lands
    ),
    attack(
        "point-the-channels-sigio-at-it",
        "cross-run",
        X + "stat = sysmod.modules['stat']\n"
        "fd = [fd for fd in range(3, 64) if works(lambda: os.fstat(fd)) == 'ESCAPED'"
        " and stat.S_ISSOCK(os.fstat(fd).st_mode)][0]\nowner = ctypes.c_int(victim)\n"
        "'ESCAPED' if libc.ioctl(fd, 0x8901, ctypes.byref(owner)) == 0 else 'no'",  # FIOSETOWN
    ),
    attack(
        "compare-its-memory-with-kcmp",
        "cross-run",
        X + "'ESCAPED' if sc('kcmp', os.getpid(), victim, 1, 0, 0) >= 0 else 'no'",  # KCMP_VM
    ),
    attack(
        "pidfd-of-it",
        "cross-run",
        X + "works(lambda: os.pidfd_open(victim))",
    ),
    attack(
        "read-its-memory",
        "cross-run",
        X + "class Iovec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(8)\n"
        "local = Iovec(ctypes.addressof(buf), 8)\nremote = Iovec(id(None), 8)\n"
        "n = libc.process_vm_readv(victim, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)\n"
        "'ESCAPED' if n == 8 else 'no'",
    ),
    attack(
        "read-its-robust-list",
        "cross-run",
        X + "head = ctypes.c_void_p()\nsize = ctypes.c_size_t()\n"
        "got = sc('get_robust_list', victim, ctypes.addressof(head), ctypes.addressof(size))\n"
        "'ESCAPED' if got == 0 else 'no'",
    ),
    attack(
        "read-its-cpu-clock",
        "cross-run",
        X + "time = sysmod.modules['time']\n"
        "works(lambda: time.clock_gettime(((~victim) << 3) | 2))",  # its CPUCLOCK_SCHED
    ),
    attack(
        "read-its-proc-status",
        "cross-run",
        X + "data = realopen(f'/proc/{victim}/status').read()\n"
        "'ESCAPED' if 'Pid' in data else 'no'",
    ),
    attack(
        "list-the-pids-of-others",
        "cross-run",
        X + "pids = [int(e) for e in os.listdir('/proc') if e.isdigit()]\n"
        "'ESCAPED' if victim in pids else 'no'",
    ),
    attack(
        "lock-its-out-directory",
        "cross-run",
        # its out/ (its workspace is victim-0 beside this one): mode 0 and it can write nothing
        X + "os.chmod('../victim-0/out', 0)\n"
        "'ESCAPED' if os.stat('../victim-0/out').st_mode & 0o777 == 0 else 'no'",
    ),
    attack(
        "pipe-buffers-from-the-users-share",
        "resources",
        # each pipe grown to 1 MiB from its uid's share of pipe pages: as an ordinary user that
        # share is the user's, the host's channels to every run included
        P + "fcntl = sysmod.modules['fcntl']\nr, w = os.pipe()\n"
        "works(lambda: fcntl.fcntl(w, 1031, 1 << 20))",  # F_SETPIPE_SZ
    ),
    # ---------------------------------------------------------------- persistence
    attack(
        "file-in-tmp",
        "persistence",
        P + "'ESCAPED' if realopen(inputs['scratch'] + '/planted').read() == 'x' else 'no'",
        setup=P + "realopen(inputs['scratch'] + '/planted', 'w').write('x')",
    ),
    attack(
        "tamper-refs",
        "persistence",
        "'ESCAPED' if read_text('refs/note.txt') == 'tampered' else 'no'",
        setup=P + "realopen('refs/note.txt', 'w').write('tampered')",
    ),
    attack(
        "plant-code-in-the-sandbox-package",
        "persistence",
        P + "'ESCAPED' if os.path.exists(inputs['package'] + '/_planted.py') else 'no'",
        setup=P + "realopen(inputs['package'] + '/_planted.py', 'w').write('x = 1')",
        control=False,  # would write into the source tree
    ),
    attack(
        "patch-a-module",
        "persistence",
        "import json\n'ESCAPED' if json.dumps(1) != '1' else 'no'",
        setup=P + "sysmod.modules['json'].dumps = lambda *a, **k: 'patched'",
        control=False,  # each run is a fresh fork: nothing flows back to the zygote
    ),
    attack(
        "patch-builtins",
        "persistence",
        "'ESCAPED' if len([]) == 42 else 'no'",
        setup=P + "sysmod.modules['builtins'].len = lambda x: 42",
        control=False,
    ),
    attack(
        "environment-variable",
        "persistence",
        P + "'ESCAPED' if os.environ.get('PLANTED') else 'no'",
        setup=P + "os.environ['PLANTED'] = '1'",
        control=False,
    ),
    attack(
        "proxy-mutation",
        "persistence",
        "import math\n'ESCAPED' if math.pi != 3.141592653589793 else 'no'",
        setup="import math\nmath.pi = 3",
        control=False,
    ),
    # SysV and POSIX IPC objects outlive the process that made them: each one a setup run
    # leaves must be gone for the next run (an IPC namespace per child). The attack removes
    # what it found, so a control leaves nothing on the machine.
    attack(
        "sysv-shared-memory-left-behind",
        "persistence",
        P + IPC + "sid = libc.shmget(key, 0, 0)\n"
        "found = sid >= 0 and ctypes.string_at(libc.shmat(sid, None, 0), 7) == b'PLANTED'\n"
        "if sid >= 0:\n    libc.shmctl(sid, 0, None)\n"
        "'ESCAPED' if found else 'no'",
        setup=P + IPC + "sid = libc.shmget(key, 4096, 0o1666)\n"
        "ctypes.memmove(libc.shmat(sid, None, 0), b'PLANTED', 7)",
    ),
    attack(
        "sysv-semaphore-left-behind",
        "persistence",
        P + IPC + "sid = libc.semget(key, 1, 0)\n"
        "found = sid >= 0 and libc.semctl(sid, 0, 12) == 42\n"  # GETVAL
        "if sid >= 0:\n    libc.semctl(sid, 0, 0)\n"
        "'ESCAPED' if found else 'no'",
        setup=P + IPC + "libc.semctl(libc.semget(key, 1, 0o1666), 0, 16, 42)",  # SETVAL
    ),
    attack(
        "sysv-message-left-behind",
        "persistence",
        P + IPC + "qid = libc.msgget(key, 0)\nbuf = ctypes.create_string_buffer(32)\n"
        "got = libc.msgrcv(qid, buf, 16, 0, 0o4000) if qid >= 0 else -1\n"  # IPC_NOWAIT
        "if qid >= 0:\n    libc.msgctl(qid, 0, None)\n"
        "'ESCAPED' if got > 0 and b'PLANTED' in buf.raw else 'no'",
        setup=P + IPC + "buf = ctypes.create_string_buffer(b'\\x01' + bytes(7) + b'PLANTED', 32)\n"
        "libc.msgsnd(libc.msgget(key, 0o1666), buf, 7, 0)",
    ),
    attack(
        "posix-message-queue-left-behind",
        "persistence",
        P + IPC + "fd = libc.mq_open(name, 0)\n"  # O_RDONLY (the umask leaves others that)
        "if fd >= 0:\n    libc.mq_unlink(name)\n"
        "'ESCAPED' if fd >= 0 else 'no'",
        setup=P + IPC + "libc.mq_open(name, 0o102, 0o666, None)",  # O_CREAT | O_RDWR
    ),
    # Kernel keys outlive the process that made them too: one left in the user's keyring (every
    # process of the uid shares it) must not reach the next run. The attack unlinks what it
    # found.
    attack(
        "user-keyring-key-left-behind",
        "persistence",
        P + IPC + KEYS + "listed = ctypes.create_string_buffer(4096)\n"
        "size = keyctl(11, -4, listed, 4096)\n"  # KEYCTL_READ of KEY_SPEC_USER_KEYRING
        "serials = (ctypes.c_int32 * 1024).from_buffer(listed)[: max(size, 0) // 4]\n"
        "found = False\n"
        "for serial in serials:\n"
        "    about = ctypes.create_string_buffer(512)\n"
        "    keyctl(6, serial, about, 512)\n"  # KEYCTL_DESCRIBE: type;uid;gid;perm;description
        "    if about.value.endswith(b';' + name):\n"
        "        value = ctypes.create_string_buffer(16)\n"
        "        found = keyctl(11, serial, value, 16) == 7 and value.raw[:7] == b'PLANTED'\n"
        "        keyctl(9, serial, -4)\n"  # KEYCTL_UNLINK
        "'ESCAPED' if found else 'no'",
        setup=P + IPC + KEYS + "add_key(b'user', name, b'PLANTED', 7, -4)",
    ),
]


def cases() -> list[Any]:
    """(attack, mode, host) triples: every attack in full mode, OS categories with the language
    layer off, language categories with the OS layers off, and controls with both off, all
    with the zygote started as the tests run (``tests``); and every OS category's language-off
    and control runs again with the zygote started as an ordinary user (``user``:
    :mod:`unprivileged`), where the OS layers come from user namespaces (the language layer
    on as well would only test it again)."""
    params = []
    for case in ATTACKS:
        modes = ["full"]
        modes.append("language-off" if case.category in OS else "os-off")
        if case.control:
            modes.append("control")
        for mode in modes:
            name = f"{mode}-{case.category}-{case.name}"
            marks = []
            if case.name in USER_CONTROL_UNABLE and mode == "control" and os.geteuid() != 0:
                marks.append(pytest.mark.skip(reason=USER_CONTROL_UNABLE[case.name]))
            params.append(pytest.param(case, mode, "tests", id=name, marks=marks))
            if case.category in OS and mode != "full":  # language-off is the stronger test
                marks = []
                if case.name in USER_CONTROL_UNABLE and mode == "control":
                    marks.append(pytest.mark.skip(reason=USER_CONTROL_UNABLE[case.name]))
                params.append(pytest.param(case, mode, "user", id=f"as-user-{name}", marks=marks))
    return params


USER_CONTROL_UNABLE: dict[str, str] = {  # also when the tests themselves run as a user
    "raw-packet-socket": "a raw socket in the host's network namespace needs CAP_NET_RAW "
    "there, which no process of an ordinary user holds, even unprotected",
    "proc-environ-of-the-host": "the host is outside the user namespace an ordinary user's "
    "zygote lives in (and root's, when the tests run as root): the kernel refuses the read "
    "even unprotected",
    "proc-maps-of-the-host": "the host is outside the user namespace an ordinary user's "
    "zygote lives in (and root's, when the tests run as root): the kernel refuses the read "
    "even unprotected",
}
"""Controls that can't show their attack working unprotected as an ordinary user, and why
(the table lists them as not run)."""


ONE_LAYER: frozenset[str] = frozenset(
    {
        # Pure introspection: reaching a frame, a function's globals or a class is not a
        # system call, so no OS layer can see it; the OS layers stop what would come after.
        *("subclasses-walk", "mro-to-object", "function-globals", "closure-cells"),
        *("bound-method-self", "print-self", "class-of-inputs", "exception-class-init"),
        *("tools-namespace-internals", "proxy-internals"),
        *("format-attribute-walk", "format-function-globals", "format-map"),
        *("format-through-the-type", "f-string-attribute"),
        *("traceback-frame-globals", "tool-error-traceback", "exception-context"),
        *("traceback-without-dunder", "generator-frame", "generator-code"),
        *("generator-frame-locals", "yield-from-target", "coroutine-frame"),
        "async-generator-frame",
        "dialect-gather-globals",
        "dialect-return-traceback",
        # Allowlisted stdlib callables turned on the interpreter: with the language layer off
        # the script has the real builtins anyway, and none of it is a system call.
        *("wraps-merges-module-globals", "wraps-swaps-a-stdlib-function-code"),
        *("wraps-makes-a-stdlib-class-writable", "wraps-hands-out-update-wrapper"),
        *("wraps-renames-a-stdlib-function", "function-attribute-write-on-stdlib"),
        *("unbound-method-hands-out-type", "unbound-method-of-a-subclass"),
        *("class-property-hands-out-its-getter", "nested-class-adopts-a-stdlib-class"),
        # Resources only the rlimits bound: no language check counts CPU or memory (the two
        # memory bombs are not run without the OS layers; see the module doc).
        *("cpu-loop", "memory-bomb", "string-memory-bomb"),
    }
)
"""Attacks that only their own category's layer stops (see the module doc)."""

RUN_TO_THE_DEADLINE: frozenset[str] = frozenset({"cpu-loop"})
"""The attacks of :data:`ONE_LAYER` that, their own layer off, run until the suite's deadline
(nothing else stops them); every other one escapes."""

DEADLINE_ALONE_S: Final = 3.0
"""The suite's deadline for :data:`RUN_TO_THE_DEADLINE` with their own layer off: the time the
test waits for them, so kept short; every other attack gets :func:`run_attack`'s generous
default, which only a hung run reaches."""


def other_layer_cases() -> list[Any]:
    """(attack, mode) pairs with the attack's own layer off and the other layer on."""
    params = []
    for case in ATTACKS:
        mode = "os-off" if case.category in OS else "language-off"
        marks = (
            [pytest.mark.skip(reason="unsafe without its own layer")] if case.unsafe_alone else []
        )
        params.append(
            pytest.param(case, mode, "tests", id=f"{mode}-{case.category}-{case.name}", marks=marks)
        )
    return params


def test_suite_size() -> None:
    """The suite holds at least 50 distinct attacks across every category."""
    assert len({case.name for case in ATTACKS}) == len(ATTACKS) >= 50
    assert {case.category for case in ATTACKS} == set(LANGUAGE + OS)


@pytest.fixture
def host(request: pytest.FixtureRequest) -> str:
    """Who started the zygote of this test's runs: ``tests`` (as the tests run) or ``user``
    (an ordinary user, :mod:`unprivileged`)."""
    return str((getattr(request.node, "callspec", None) and request.node.callspec.params.get(
        "host", "tests")) or "tests")  # fmt: skip


@pytest.fixture
def zygote(host: str, request: pytest.FixtureRequest) -> ZygoteProcess:
    """The zygote of this test's runs (:func:`host`)."""
    fixture = "user_zygote" if host == "user" else "security_zygote"
    zygote: ZygoteProcess = request.getfixturevalue(fixture)
    return zygote


@pytest.fixture
def base(host: str, tmp_path: Path) -> Iterator[Path]:
    """Where a test's workspace and the paths outside it live: ``tmp_path``, or, for the
    ordinary user's zygote, a directory of that user's (the files a user's sandbox guards are
    the user's own), removed after."""
    if host != "user":
        yield tmp_path
        return
    directory = user_directory()
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def environment(host: str, base: Path, zygote: ZygoteProcess) -> Iterator[dict[str, Any]]:
    """A workspace, paths outside it, a listening loopback port, a test-set secret, the
    zygote's pid and an IPC key of the test's own."""
    workspace = base / "ws"
    (workspace / "refs").mkdir(parents=True)
    (workspace / "out").mkdir()
    (workspace / "refs" / "note.txt").write_text("hello refs")
    os.chmod(workspace, 0o755)
    os.chmod(workspace / "refs", 0o755)
    scratch = base / "scratch"
    scratch.mkdir()
    (base / "secret.txt").write_text("top secret")
    if host == "user":
        hand_to_user(base)
    package = Path(__file__).resolve().parents[2] / "sandbox"
    os.environ["SCRIPTBRIDGE_SUITE_SECRET"] = "s3cret"
    with socket.create_server(("127.0.0.1", 0)) as server:
        try:
            yield {
                "workspace": workspace,
                "marker": base / "marker",
                "outside": base / "outside.txt",
                "package": package,
                "inputs": {
                    "port": server.getsockname()[1],
                    "secret": str(base / "secret.txt"),
                    "outside": str(base / "outside.txt"),
                    "marker": str(base / "marker"),
                    "scratch": str(scratch),
                    "host": os.getpid(),
                    "zygote": zygote.pid,
                    "package": str(package),
                    "ipc_key": secrets.randbelow(2**30) + 1,
                },
            }
        finally:
            del os.environ["SCRIPTBRIDGE_SUITE_SECRET"]
            (package / "_planted.py").unlink(missing_ok=True)


QUOTA = (8 * 2**20, 100)
"""The disk quota of every run of the suite: bytes, and files and directories, in ``out/``."""

REFUSED_WHOLE = frozenset({"sparse-ftruncate", "fallocate-past-the-end"})
"""Disk attacks the kernel refuses whole, leaving nothing past the quota: the run ends as the
script ends it. Every other disk attack, blocked, ends with ``DiskQuotaExceeded``."""


def within_quota(environment: dict[str, Any]) -> str | None:
    """``None`` when the workspace's ``out/`` holds no more than :data:`QUOTA` (file sizes,
    entries, and blocks allocated past a file's end), else what it holds."""
    size = entries = blocks = 0
    for directory, dirs, files in os.walk(environment["workspace"] / "out"):
        entries += len(dirs) + len(files)
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            size += info.st_size
            blocks += info.st_blocks * 512
    max_bytes, max_entries = QUOTA
    if size <= max_bytes and entries <= max_entries and blocks <= max_bytes + entries * 8192:
        return None
    return f"out/ holds {size} bytes ({blocks} allocated) in {entries} entries"


def echo(args: dict[str, Any]) -> dict[str, Any]:
    """A harmless tool."""
    return {"content": [], "data": args, "isError": False}


_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(platform.machine())
_LIBC = ctypes.CDLL(None, use_errno=True)


def process_state(pid: int) -> dict[str, Any]:
    """What another process could change about ``pid``, as the host reads it: its open-file
    limit, nice value, scheduling policy and priority, CPU affinity and I/O priority; or
    ``{"gone": ...}`` once it can't be read."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return {"gone": str(exc)}
    ioprio = None
    if _IOPRIO_GET is not None:
        ioprio = _LIBC.syscall(ctypes.c_long(_IOPRIO_GET), ctypes.c_long(1), ctypes.c_long(pid))
    return {
        "nofile": [line for line in limits if line.startswith("Max open files")],
        "state": stat[0] not in ("Z", "X"),
        "nice": stat[16],  # field 19 of stat (the fields here start at field 3)
        "rt_priority_policy": stat[37:39],
        "cpus": [line for line in status if line.startswith("Cpus_allowed_list")],
        "ioprio": ioprio,
    }


@dataclass
class Victim:
    """Another run's child, spawned through the same zygote and left waiting for its script:
    the target of a cross-run attack."""

    zygote: ZygoteProcess
    child: SpawnedChild
    before: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(
        cls, zygote: ZygoteProcess, workspace: Path, disable: Collection[str], *, user: bool
    ) -> Victim:
        """Spawn one in ``workspace`` with ``disable`` (the ordinary user's, when ``user``),
        and wait for its ``ready``."""
        (workspace / "refs").mkdir(parents=True)
        (workspace / "out").mkdir()
        os.chmod(workspace, 0o755)
        if user:
            hand_to_user(workspace)
        child = zygote.client.spawn(workspace, ChildLimits(), disable=disable)
        victim = cls(zygote, child)
        try:
            ready = BlockingChannel(child.from_child, child.to_child).receive_child()
            assert isinstance(ready, Ready), ready
        except BaseException:
            victim.close()
            raise
        victim.before = process_state(child.pid)
        return victim

    @property
    def pid(self) -> int:
        """Its pid, as the host (and the zygote) number it."""
        return self.child.pid

    def harmed(self) -> bool:
        """Whether anything of it changed since it started, or it can't run a script to the end
        any more (this runs its script: ask once)."""
        if process_state(self.pid) != self.before:
            return True
        channel = BlockingChannel(self.child.from_child, self.child.to_child)
        try:
            channel.send(Start(source="'alive'"))
            reply = channel.receive_child()
        except (OSError, ProtocolError):
            return True
        return not (isinstance(reply, Done) and reply.value == "alive")

    def close(self) -> None:
        """Let it go and wait until it has been reaped."""
        os.close(self.child.to_child)
        os.close(self.child.from_child)
        self.zygote.client.wait(self.pid, timeout=10)


@pytest.fixture
def victims(zygote: ZygoteProcess, base: Path, host: str) -> Iterator[Callable[[str], Victim]]:
    """Start victims in a mode (see :class:`Victim`); each is let go at the end of the test."""
    started: list[Victim] = []

    def start(mode: str) -> Victim:
        workspace = base / f"victim-{len(started)}"
        victim = Victim.start(zygote, workspace, MODES[mode], user=host == "user")
        started.append(victim)
        return victim

    yield start
    for victim in started:
        victim.close()


def run_attack(
    zygote: ZygoteProcess,
    case: Attack,
    mode: str,
    environment: dict[str, Any],
    victims: Callable[[str], Victim],
    timeout: float = 20,
) -> RunRecord:
    """Run the attack (after its setup, if any) in ``mode``; return the attack's record. A
    cross-run attack gets a victim of its own, started in the same mode, in
    ``environment["victim"]``."""
    if case.category == "cross-run":
        victim = victims(mode)
        environment["victim"] = victim
        environment["inputs"]["victim"] = victim.pid

    def one(source: str) -> RunRecord:
        return run_script(
            zygote.client,
            source,
            workspace=environment["workspace"],
            tools={"docs.search": echo},
            inputs=environment["inputs"],
            limits=ChildLimits(
                cpu_s=1,
                memory_mb=256,
                max_file_bytes=16 * 2**20,
                max_out_bytes=QUOTA[0],
                max_out_files=QUOTA[1],
            ),
            run_limits=RunLimits(
                max_output_bytes=1_000_000,
                max_tool_calls=100,
                max_out_bytes=QUOTA[0],
                max_out_files=QUOTA[1],
            ),
            disable=MODES[mode],
            timeout=timeout,
        )

    if case.setup is not None:
        one(case.setup)
    return one(case.source)


@pytest.mark.parametrize(("case", "mode", "host"), cases())
def test_attack(
    case: Attack,
    mode: str,
    host: str,
    zygote: ZygoteProcess,
    environment: dict[str, Any],
    victims: Callable[[str], Victim],
    record_property: Any,
) -> None:
    """The attack is blocked (or, in control mode, really succeeds unprotected), whoever
    started the zygote."""
    record = run_attack(zygote, case, mode, environment, victims)
    verdict = verdict_of(record, environment)
    record_property("security_mode", mode if host == "tests" else f"{mode}@user")
    record_property("security_verdict", verdict)
    record_property("security_category", case.category)
    record_property("security_case", case.name)
    detail = f"{record.final!r} {record.host_error} {record.exit}"
    if mode == "control":
        assert verdict == "escaped", f"the attack did not work even unprotected: {detail}"
    else:
        assert verdict == "blocked", detail
        assert not environment["outside"].exists()
        assert record.exit is not None
        if case.category == "disk":
            assert within_quota(environment) is None, within_quota(environment)
            if mode == "language-off" and case.name not in REFUSED_WHOLE:
                assert record.error_type == "DiskQuotaExceeded", detail


def verdict_of(record: RunRecord, environment: dict[str, Any]) -> str:
    """``escaped``, ``blocked``, or ``not stopped by the sandbox`` (the suite's deadline hit).
    A cross-run attack has also escaped when its victim was harmed."""
    if record.host_error == "WallTimeExceeded":
        return "not stopped by the sandbox"
    victim = environment.get("victim")
    escaped = (
        record.value == "ESCAPED"
        or environment["marker"].exists()
        or (victim is not None and victim.harmed())
    )
    return "escaped" if escaped else "blocked"


@pytest.mark.parametrize(("case", "mode", "host"), other_layer_cases())
def test_the_other_layer_alone(
    case: Attack,
    mode: str,
    host: str,
    zygote: ZygoteProcess,
    environment: dict[str, Any],
    victims: Callable[[str], Victim],
    record_property: Any,
) -> None:
    """With the attack's own layer off, the other layer alone blocks it, unless it is one of
    the attacks pinned as stopped by one layer only."""
    timeout = DEADLINE_ALONE_S if case.name in RUN_TO_THE_DEADLINE else 20.0
    record = run_attack(zygote, case, mode, environment, victims, timeout=timeout)
    verdict = verdict_of(record, environment)
    record_property("security_mode", mode)
    record_property("security_verdict", verdict)
    record_property("security_category", case.category)
    record_property("security_case", case.name)
    record_property("security_other_layer", True)
    detail = f"{verdict}: {record.final!r} {record.host_error} {record.exit}"
    if case.name in ONE_LAYER:
        expected = "not stopped by the sandbox" if case.name in RUN_TO_THE_DEADLINE else "escaped"
        assert verdict == expected, f"now blocked by the other layer too: {detail}"
    else:
        assert verdict == "blocked", f"only one layer stops it now: {detail}"
        if case.category == "disk":
            assert within_quota(environment) is None, within_quota(environment)
    assert record.exit is not None


def test_one_layer_list_matches_security_md() -> None:
    """SECURITY.md lists by name exactly the attacks that only one layer stops."""
    text = (Path(__file__).resolve().parents[2] / "SECURITY.md").read_text()
    section = text.split("<!-- one-layer:start -->", 1)[1].split("<!-- one-layer:end -->", 1)[0]
    listed = {line.split("`")[1] for line in section.splitlines() if line.startswith("- `")}
    assert listed == set(ONE_LAYER)
    assert RUN_TO_THE_DEADLINE <= ONE_LAYER
