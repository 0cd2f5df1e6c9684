"""The ``scriptbridge`` command line.

Only ``demo`` answers yet, and it answers that it is not built: it exits with status 2 until the
supervisor (``Bridge``) lands, so nobody mistakes a placeholder for a passing demo.
"""

from __future__ import annotations

import sys

_NOT_BUILT = (
    "scriptbridge {command}: not built yet; it arrives with the supervisor "
    "(the Bridge, the sandbox child and the demand-fetch loop)."
)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit status (0 only on success)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print("usage: scriptbridge {run,demo,doctor} ...")
        return 0 if args else 2
    print(_NOT_BUILT.format(command=args[0]), file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
