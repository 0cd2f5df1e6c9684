"""The escape hostile children here start from, written once."""

from __future__ import annotations

REAL_SYS = """
for klass in ().__class__.__base__.__subclasses__():
    if klass.__name__ == "_wrap_close":
        sysmod = klass.__init__.__globals__["sys"]
        break
os = sysmod.modules["os"]
"""
"""Plain Python (run with the language layer off: restricted, it doesn't compile) that reaches
the real ``sys`` (as ``sysmod``) and ``os`` through ``os._wrap_close``'s globals."""
