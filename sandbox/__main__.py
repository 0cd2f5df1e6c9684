"""``python -m sandbox``: print which isolation layers this machine can apply, how, or why not
and what would."""

from __future__ import annotations

from . import probe_layers


def main() -> int:
    """Print one line per layer; return 0 if every layer is available, else 1."""
    probes = probe_layers()
    for probe in probes:
        if probe.available:
            state = f"yes: {probe.mechanism}"
        else:
            state = f"no: {probe.reason}; to apply it: {probe.remedy}"
        print(f"{probe.layer:18} {state}")
    return 0 if all(probe.available for probe in probes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
