"""Tests for ``sandbox._carry`` (which statements carry as definitions, and how each is cut out
of its script) and for the carry messages of ``sandbox.protocol``. No child is started."""

from __future__ import annotations

import pytest

from sandbox._carry import _one_definition, definitions_in
from sandbox.protocol import (
    CARRY_MAX_BYTES,
    Carry,
    CarryIn,
    ProtocolError,
    Start,
    carry_bytes,
    encode_frame,
    parse_child_message,
    parse_host_message,
)


def test_only_top_level_definitions_carry_each_cut_alone() -> None:
    """def, class, import and from-import at the top level carry, each without what shares its
    lines; assignments, calls, nested and star imports don't."""
    source = (
        "import json; call_tool('x', {})\n"
        "from math import sqrt as root, pi\n"
        "x = 1\n"
        "@deco\n"
        "def f(a=1):\n    return a\n"
        "class C(Base):\n    n = 2\n"
        "if True:\n    def hidden(): pass\n"
        "from string import *\n"
        "print('x')\n"
    )
    found = definitions_in(source)
    assert [sorted(d.names) for d in found] == [["json"], ["pi", "root"], ["f"], ["C"]]
    assert found[0].source == "import json"
    assert found[2].source.startswith("@deco\ndef f(a=1):")


def test_a_carried_definition_is_one_definition_statement() -> None:
    """What re-runs is checked to be exactly one definition statement, whatever the host sent."""
    assert _one_definition("def f():\n    return 1\n") is not None
    for source in ("import json; call_tool('x', {})", "x = call_tool('x', {})", "def (", ""):
        assert _one_definition(source) is None


def test_definitions_in_never_raises() -> None:
    """A script that doesn't parse, or nests too deep, has no definitions."""
    assert definitions_in("def (") == []
    assert definitions_in("x = " + "(" * 10_000 + ")" * 10_000) == []


def test_carry_messages_round_trip_and_refuse_bad_names() -> None:
    """Start carries a CarryIn and a child's Carry parses back; a name a script can't bind,
    too many definitions or a bound past the ceiling are refused."""
    start = Start(source="1", carry=CarryIn(globals={"x": [1, b"b"]}, definitions=["import re"]))
    assert parse_host_message(encode_frame(start)[4:]) == start
    carry = Carry(globals={"x": 1}, definitions=["def f(): pass"], dropped=["gen"])
    assert parse_child_message(encode_frame(carry)[4:]) == carry
    for bad in (
        {"op": "carry", "globals": {"_getattr_": 1}},
        {"op": "carry", "globals": {"not a name": 1}},
        {"op": "carry", "dropped": ["__builtins__"]},
        {"op": "carry", "definitions": ["x"] * 1001},
    ):
        with pytest.raises(ProtocolError):
            parse_child_message(encode_frame(Carry.model_construct(**bad))[4:])
    with pytest.raises(ValueError):
        CarryIn(max_bytes=CARRY_MAX_BYTES + 1)


def test_carry_bytes_counts_names_values_and_sources() -> None:
    """The bound counts each name's and value's msgpack bytes and each source's UTF-8 bytes."""
    assert carry_bytes({}, []) == 0
    assert carry_bytes({"x": 1}, []) == 3  # fixstr "x" (2 bytes) and fixint 1
    assert carry_bytes({}, ["é"]) == 2
