"""The script globals of API.md, each exercised in a real child through the zygote.

A tiny blocking host (``sandbox.testing.run_script``) answers the child's tool calls and
fetches over the real pipes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.protocol import CallTool, CallTools, Fetch, RunError, RunLimits
from sandbox.testing import RunRecord

Run = Callable[..., RunRecord]


def echo(args: dict[str, Any]) -> dict[str, Any]:
    """A tool whose view echoes its arguments."""
    return {"content": [{"type": "text", "text": "ok"}], "data": args, "isError": False}


def fail(args: dict[str, Any]) -> Any:
    """A tool that always fails."""
    raise RuntimeError("the tool broke")


TOOLS = {"docs.search": echo, "web-fetch": echo, "broken": fail}


def test_value_is_the_last_expression(run: Run) -> None:
    """The run's value is the value of the last expression statement, as plain data."""
    record = run("x = [1, (2, 3)]\n{'x': x, 'b': b'\\x00', 'f': 1.5, 'n': None}")
    assert record.ok
    assert record.value == {"x": [1, [2, 3]], "b": b"\x00", "f": 1.5, "n": None}


def test_no_final_expression_gives_none(run: Run) -> None:
    """A script that ends with a statement has the value None."""
    record = run("x = 1")
    assert record.ok and record.value is None


def test_non_plain_value_is_its_cut_repr(run: Run) -> None:
    """A value that isn't plain data is sent as its repr, cut to max_value_bytes, with why; a
    set is plain data, as a list."""
    record = run("set(range(3))")
    assert record.ok and sorted(record.value) == [0, 1, 2]
    assert record.final is not None and not record.final.value_is_repr  # type: ignore[union-attr]
    source = "class Foo:\n    pass\n[Foo()] * 100000"
    record = run(source, run_limits=RunLimits(max_value_bytes=100))
    assert record.ok and isinstance(record.value, str) and len(record.value) == 100
    assert record.final.value_is_repr and record.final.not_plain == "a Foo"  # type: ignore[union-attr]


def test_big_int_and_surrogates(run: Run) -> None:
    """Ints past 64 bits fall back to repr; lone surrogates become U+FFFD."""
    assert run("2 ** 100").value == str(2**100)
    assert run("'a\\ud800b'").value == "a\ufffdb"


def test_inputs(run: Run) -> None:
    """``inputs`` holds the run's inputs."""
    record = run("inputs['q'] + str(inputs['n'])", inputs={"q": "hello", "n": 3})
    assert record.value == "hello3"


def test_print_is_streamed_in_order_before_requests(run: Run) -> None:
    """Printed text reaches the host before the tool call that follows it."""
    record = run(
        "print('a', 1, sep='-')\ncall_tool('docs.search', {})\nprint('b', end='')", tools=TOOLS
    )
    assert record.ok and record.output == "a-1\nb"


def test_printed_is_available(run: Run) -> None:
    """RestrictedPython's ``printed`` holds what the scope printed."""
    assert run("print('x')\nprinted").value == "x\n"


def test_output_cap_stops_the_run(run: Run) -> None:
    """Past max_output_bytes the allowed prefix is sent and the run stops, uncatchably."""
    source = "try:\n    while True:\n        print('y' * 100)\nexcept:\n    pass\n'done'"
    record = run(source, run_limits=RunLimits(max_output_bytes=1000))
    assert record.error_type == "OutputExceeded"
    assert len(record.output.encode()) == 1000


def test_call_tool(run: Run) -> None:
    """``call_tool`` sends one request and returns the view."""
    record = run("call_tool('docs.search', {'q': 'trio'})", tools=TOOLS)
    assert record.value["data"] == {"q": "trio"}
    assert record.requests == [CallTool(call_id=1, name="docs.search", args={"q": "trio"})]


def test_call_tool_keywords_and_tuples(run: Run) -> None:
    """Keyword arguments work, and tuples arrive as lists."""
    record = run("call_tool('docs.search', q='x', pair=(1, 2))['data']", tools=TOOLS)
    assert record.value == {"q": "x", "pair": [1, 2]}


def test_tools_namespace_maps_names(run: Run) -> None:
    """``tools.<name>`` turns ``.`` and ``-`` into ``_``."""
    record = run("[tools.docs_search(q=1)['data'], tools.web_fetch({'u': 2})['data']]", tools=TOOLS)
    assert record.value == [{"q": 1}, {"u": 2}]
    assert [r.name for r in record.requests] == ["docs.search", "web-fetch"]  # type: ignore[union-attr]


def test_tools_namespace_unknown_name(run: Run) -> None:
    """An unknown tool attribute raises AttributeError in the script."""
    record = run("tools.nope()", tools=TOOLS)
    assert record.error_type == "AttributeError"


def test_tool_error_raises_tool_error(run: Run) -> None:
    """A failed call raises ToolError with the error's text."""
    record = run(
        "try:\n    call_tool('broken', {})\nexcept ToolError as e:\n    r = str(e)\nr", tools=TOOLS
    )
    assert record.value == "the tool broke"


def test_call_tools_is_one_request(run: Run) -> None:
    """``call_tools`` sends the whole batch in one request and returns views in order."""
    record = run(
        "[r['data'] for r in call_tools([('docs.search', {'q': 'a'}), ('web-fetch', {'q': 'b'})])]",
        tools=TOOLS,
    )
    assert record.value == [{"q": "a"}, {"q": "b"}]
    assert len(record.requests) == 1 and isinstance(record.requests[0], CallTools)
    assert [c.name for c in record.requests[0].calls] == ["docs.search", "web-fetch"]


def test_call_tools_raises_first_failure(run: Run) -> None:
    """A failed call in a batch raises ToolError with its message."""
    record = run("call_tools([('docs.search', {}), ('broken', {})])", tools=TOOLS)
    assert isinstance(record.final, RunError) and record.final.type == "ToolError"
    assert record.final.message == "the tool broke"


def test_tool_arguments_must_be_plain(run: Run) -> None:
    """Non-plain tool arguments raise TypeError before anything is sent."""
    record = run("class Foo:\n    pass\ncall_tool('docs.search', {'x': Foo()})", tools=TOOLS)
    assert record.error_type == "TypeError" and record.requests == []


def test_tool_call_limit(run: Run) -> None:
    """More calls than max_tool_calls stop the run with ToolCallsExceeded."""
    record = run(
        "for i in range(5):\n    call_tool('docs.search', {})",
        tools=TOOLS,
        run_limits=RunLimits(max_tool_calls=3),
    )
    assert record.error_type == "ToolCallsExceeded" and len(record.requests) == 3


def test_fetch_by_block_and_id(run: Run) -> None:
    """``fetch`` takes a reference block or its id and returns the saved path."""
    record = run(
        "[fetch({'type': 'reference', 'id': 'ref_1'}), fetch('ref_2')]",
        fetch=lambda ref_id: f"refs/{ref_id}.txt",
    )
    assert record.value == ["refs/ref_1.txt", "refs/ref_2.txt"]
    assert record.requests == [Fetch(call_id=1, ref_id="ref_1"), Fetch(call_id=2, ref_id="ref_2")]


def test_fetch_unfetchable(run: Run) -> None:
    """An unfetchable reference raises Unfetchable with the host's reason."""

    def refuse(ref_id: str) -> str:
        raise LookupError("a server asked that its content never reach you or your tools")

    record = run(
        "try:\n    fetch('ref_1')\nexcept Unfetchable as e:\n    r = str(e)\nr", fetch=refuse
    )
    assert record.value == "a server asked that its content never reach you or your tools"


def test_fetch_block_without_id(run: Run) -> None:
    """A reference block without an id raises Unfetchable locally with its reason."""
    record = run(
        "try:\n    fetch({'type': 'reference', 'id': None, 'unfetchable': 'why'})\n"
        "except Unfetchable as e:\n    r = str(e)\nr"
    )
    assert record.value == "why" and record.requests == []


def test_read_text_and_bytes(run: Run) -> None:
    """``read_text``/``read_bytes`` read workspace files under refs/."""
    assert run("[read_text('refs/note.txt'), read_bytes('./refs//note.txt')]").value == [
        "hello refs",
        b"hello refs",
    ]


def test_write_text_under_out(run: Run, workspace: Path) -> None:
    """``write_text`` writes under out/ (making parents), readable back."""
    record = run("write_text('out/sub/r.md', 'hi ✓')\nread_text('out/sub/r.md')")
    assert record.value == "hi ✓"
    assert (workspace / "out" / "sub" / "r.md").read_text() == "hi ✓"


@pytest.mark.parametrize(
    "source",
    [
        "write_text('refs/x.txt', 'no')",
        "write_text('x.txt', 'no')",
        "write_text('out/../refs/x.txt', 'no')",
        "write_text('/tmp/x.txt', 'no')",
        "read_text('/etc/passwd')",
        "read_text('../../etc/passwd')",
        "read_text('refs/../../x')",
        "read_text('out')",
    ],
)
def test_paths_outside_are_refused(run: Run, source: str) -> None:
    """Paths outside refs/ (read) and out/ (write) raise PermissionError."""
    assert run(source).error_type == "PermissionError"


def test_symlink_in_refs_is_not_followed(run: Run, workspace: Path) -> None:
    """A symlink under refs/ that points outside is refused."""
    (workspace / "refs" / "link").symlink_to("/etc/passwd")
    assert run("read_text('refs/link')").error_type == "PermissionError"


def test_exception_classes_are_globals(run: Run) -> None:
    """ToolError and Unfetchable are exception classes a script can raise and catch."""
    record = run("try:\n    raise Unfetchable('x')\nexcept Exception as e:\n    r = str(e)\nr")
    assert record.value == "x"


def test_compile_error_has_line(run: Run) -> None:
    """A syntax error is reported as data with its line."""
    record = run("x = 1\ny = (\n")
    assert isinstance(record.final, RunError)
    assert record.final.phase == "compile" and record.final.type == "SyntaxError"
    assert record.final.line == 2


def test_policy_error_has_line(run: Run) -> None:
    """A RestrictedPython policy error is reported with its line."""
    record = run("x = 1\n\nx.__class__")
    assert isinstance(record.final, RunError)
    assert record.final.type == "CompileError" and record.final.line == 3
    assert "__class__" in record.final.message


def test_runtime_error_has_line(run: Run) -> None:
    """A runtime error is reported with its type, message and line."""
    record = run("def f():\n    return {}['k']\n\nf()")
    assert isinstance(record.final, RunError)
    assert (record.final.type, record.final.line, record.final.phase) == ("KeyError", 2, "run")


def test_allowed_imports_work(run: Run) -> None:
    """Every allowlisted module imports and works."""
    source = """
import json, math, re, datetime, collections, itertools, functools, statistics, random
import string, textwrap, base64, hashlib, decimal, fractions, heapq, bisect, difflib, time
from datetime import datetime as dt
[
    json.loads(json.dumps({'a': 1})), math.sqrt(16), re.sub('a', 'b', 'aa'),
    dt(2024, 1, 2).strftime('%Y'), dt.strptime('2024', '%Y').year,
    collections.Counter('aab')['a'], list(itertools.islice(itertools.count(), 2)),
    functools.reduce(lambda a, b: a + b, [1, 2]), statistics.mean([1, 3]),
    random.Random(1).randint(1, 1), string.digits, textwrap.shorten('a b c d', 5),
    base64.b64encode(b'x'), hashlib.sha256(b'').hexdigest()[:4], str(decimal.Decimal('1.5')),
    str(fractions.Fraction(1, 2)), heapq.nsmallest(1, [3, 1]), bisect.bisect([1, 3], 2),
    difflib.get_close_matches('appel', ['apple']), time.monotonic() > 0,
]
"""
    record = run(source)
    assert record.ok, record.final
    assert record.value[:4] == [{"a": 1}, 4.0, "bb", "2024"]


def test_random_differs_between_runs(run: Run) -> None:
    """Each forked child reseeds its random generator."""
    values = {run("import random\nrandom.random()").value for _ in range(3)}
    assert len(values) == 3


def test_class_definitions_work(run: Run) -> None:
    """Scripts can define and use classes."""
    source = "class P:\n    def __init__(self, x):\n        self.x = x\nP(3).x"
    assert run(source).value == 3


def test_language_layer_off_runs_plain_python(run: Run) -> None:
    """With restricted-python disabled, the plain compiler runs the script (suite mode)."""
    record = run("().__class__.__name__", disable={"restricted-python"})
    assert record.ok and record.value == "tuple"
    assert record.ready is not None and "restricted-python" not in record.isolation
    assert record.ready.skipped[0].layer == "restricted-python"


# The boundary: the script API reads what a script hands it as exact builtin types.

LIARS = """
class Name(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def split(self, *args):
        return ['lie']
    def encode(self, *args):
        return b'lie'
    def startswith(self, *args):
        return True
class Args(dict):
    def items(self):
        return [('lie', 1)]
    def keys(self):
        return ['lie']
    def get(self, *args):
        return 'lie'
class Calls(list):
    def __contains__(self, item):
        return False
    def count(self, *args):
        return 0
    def copy(self):
        return []
"""


def test_tool_names_and_arguments_are_read_as_exact_types(run: Run) -> None:
    """A str subclass name and a dict subclass argument reach the host as their real
    contents, whatever their methods say."""
    record = run(
        LIARS + "call_tool(Name('docs.search'), Args(q=Name('x')))\n"
        "call_tools(Calls([Calls([Name('web-fetch'), Args(n=2)])]))\n'done'",
        tools=TOOLS,
    )
    assert record.value == "done", record.final
    assert record.requests[0] == CallTool(call_id=1, name="docs.search", args={"q": "x"})
    batch = record.requests[1]
    assert isinstance(batch, CallTools)
    assert [(c.name, c.args) for c in batch.calls] == [("web-fetch", {"n": 2})]
    assert type(record.requests[0].args["q"]) is str  # type: ignore[union-attr]


def test_fetch_reads_a_dict_subclass_as_a_dict(run: Run) -> None:
    """``fetch`` reads a reference block's id through dict's own lookup, not the block's
    ``get``."""
    record = run(
        LIARS + "fetch(Args({'type': 'reference', 'id': Name('ref_1')}))",
        fetch=lambda ref_id: f"refs/{ref_id}.txt",
    )
    assert record.value == "refs/ref_1.txt"
    assert record.requests == [Fetch(call_id=1, ref_id="ref_1")]


def test_paths_and_text_are_read_as_exact_types(run: Run, workspace: Path) -> None:
    """A path whose ``split``/``startswith`` lie is checked as the plain text it holds, and
    ``write_text`` writes the real text, not what ``encode`` returns."""
    record = run(
        LIARS + "write_text(Name('out/a.txt'), Name('real'))\nread_text(Name('out/a.txt'))"
    )
    assert record.value == "real", record.final
    assert (workspace / "out" / "a.txt").read_text() == "real"
    refused = run(LIARS + "read_text(Name('/etc/passwd'))")
    assert refused.error_type == "PermissionError"


def test_print_reads_sep_and_end_as_exact_types(run: Run) -> None:
    """``print`` takes str subclasses for ``sep``/``end`` as the text they hold."""
    record = run(LIARS + "print('a', 'b', sep=Name('-'), end=Name('!'))")
    assert record.ok and record.output == "a-b!"


@pytest.mark.parametrize(
    "source",
    [
        "call_tool(1, {})",
        "call_tools({'a': 1})",
        "call_tools([{'docs.search': {}}])",
        "read_text(b'refs/note.txt')",
        "write_text('out/x', b'x')",
        "print('a', sep=1)",
    ],
)
def test_wrong_types_are_refused_with_type_error(run: Run, source: str) -> None:
    """A value of the wrong type at the boundary is a clear TypeError in the script."""
    record = run(source, tools=TOOLS)
    assert record.error_type == "TypeError", record.final


def test_the_sandbox_own_functools_and_namedtuple_work(run: Run) -> None:
    """``functools.wraps``, ``total_ordering`` and ``namedtuple`` work on the script's own
    functions and classes, and refuse the stdlib's."""
    record = run(
        "import functools, collections, textwrap\n"
        "def deco(f):\n    @functools.wraps(f)\n    def inner(*a):\n        return f(*a) + 1\n"
        "    return inner\n"
        "@deco\ndef two():\n    'Two.'\n    return 2\n"
        "@functools.total_ordering\nclass V:\n    def __init__(self, v):\n        self.v = v\n"
        "    def __lt__(self, o):\n        return self.v < o.v\n"
        "    def __eq__(self, o):\n        return self.v == o.v\n"
        "P = collections.namedtuple('P', 'x y')\np = P(1, 2)\nP.extra = 5\n"
        "errors = []\n"
        "for attempt in (lambda: functools.wraps(two)(textwrap.dedent),\n"
        "                lambda: functools.total_ordering(textwrap.TextWrapper),\n"
        "                lambda: functools.wraps(two, assigned=()),):\n"
        "    try:\n        attempt()\n    except TypeError:\n        errors.append('refused')\n"
        "[two(), repr(two).split()[1], V(1) >= V(0), p.x + p.y + p.extra, errors]"
    )
    assert record.value == [3, "two", True, 8, ["refused"] * 3], record.final


def test_write_text_counts_the_runs_bytes_and_files(run: Run, workspace: Path) -> None:
    """``write_text`` counts what the run left in out/ (bytes of every file, and files and
    directories) and refuses the write that would pass max_out_bytes or max_out_files."""
    limits = RunLimits(max_out_bytes=100, max_out_files=3)
    ok = run("write_text('out/a', 'x' * 60)\nwrite_text('out/a', 'y' * 90)\n1", run_limits=limits)
    assert ok.value == 1  # a replaced file counts its new size, not both
    record = run("write_text('out/a', 'x' * 60)\nwrite_text('out/b', 'x' * 41)", run_limits=limits)
    assert record.error_type == "DiskQuotaExceeded"
    assert "more than 100 bytes" in record.final.message  # type: ignore[union-attr]
    assert not (workspace / "out" / "b").exists()


def test_write_text_counts_the_directories_it_makes(run: Run, workspace: Path) -> None:
    """Parent directories made for a file count as entries, checked before any is made."""
    limits = RunLimits(max_out_files=3)
    record = run(
        "write_text('out/a/b/c.txt', 'x')\nwrite_text('out/d/e.txt', 'x')", run_limits=limits
    )
    assert record.error_type == "DiskQuotaExceeded"
    assert "more than 3 files and directories" in record.final.message  # type: ignore[union-attr]
    assert not (workspace / "out" / "d").exists()


def test_the_disk_quota_stop_is_sticky(run: Run) -> None:
    """A script that catches the refused write can't write, print or call on afterwards."""
    source = (
        "try:\n    write_text('out/a', 'x' * 200)\nexcept BaseException:\n    pass\n"
        "write_text('out/b', 'x')\n'went on'"
    )
    record = run(source, run_limits=RunLimits(max_out_bytes=100))
    assert record.error_type == "DiskQuotaExceeded"
