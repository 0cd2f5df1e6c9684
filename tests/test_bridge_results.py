"""What a run gives back, whatever the script did: ``bridge.run`` never raises for it and its
``ScriptResult`` always serializes to JSON (SPEC 7.6). Real children."""

from __future__ import annotations

import json
import pathlib

from scriptbridge._limits import Limits
from scriptbridge._supervisor import Bridge
from scriptbridge._workspace import remove_tree


async def test_a_deep_out_is_listed_without_recursion(bridge: Bridge) -> None:
    """An ``out/`` 1,500 directories deep is listed iteratively (no RecursionError)."""
    source = "write_text('out/' + 'd/' * 1500 + 'f.txt', 'deep')\n"
    runs = bridge.workspace.root / "runs"
    try:
        result = await bridge.run(source, limits=Limits(max_out_files=5000))
        assert result.ok, result.error
        (output,) = result.outputs
        below_out = output.split("/out/", 1)[1]  # the run's id may hold a "/d" of its own
        assert below_out == "d/" * 1500 + "f.txt"
        json.loads(result.model_dump_json())
        run_dir = bridge.workspace.root / pathlib.Path(output).parts[0]
        run_dir = run_dir / pathlib.Path(output).parts[1]
        remove_tree(run_dir)  # what the bridge removes runs with: iterative, however deep
        assert not run_dir.exists()
    finally:  # a tree this deep left behind would break pytest's own (recursive) clean-up
        remove_tree(runs)


async def test_bytes_values_and_odd_names_serialize(bridge: Bridge) -> None:
    """A bytes value and a file name that isn't UTF-8 still give a result JSON can carry."""
    result = await bridge.run("write_text('out/\\udcff', 'x')\n{'b': b'\\x00\\xff'}\n")
    assert result.ok, result.error
    assert result.value == {"b": b"\x00\xff"}
    data = json.loads(result.model_dump_json())
    assert data["value"] == {"b": {"$bytes": "AP8="}}
    assert data["outputs"][0].endswith("/out/\ufffd")
