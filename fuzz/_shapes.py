"""Hostile values built from a fuzzer's bytes, shared by the fuzz targets beside it.

:class:`Builder` reads a :class:`atheris.FuzzedDataProvider` and builds one value: tool results,
content arrays and blocks, any data below them. Every byte steers a choice, so a coverage-guided
fuzzer that mutates the bytes mutates the value's shape:

- nesting (dicts, lists, tuples, at any depth, past the walks' depth limit too);
- aliasing and cycles (a container reused, or put inside itself or an ancestor);
- every leaf type of plain data (``None``, bools, ints small and huge, floats with NaN and the
  infinities, bytes, str), strings with lone surrogates, NULs, non-Latin-1 characters, the
  words the walks look for (block types, field names, ``never`` in every spelling) and
  strings spliced from them;
- exact builtin types and their subclasses (a ``str`` subclass as a key or a ``type``, a
  ``dict`` subclass of a block's shape), and objects that are no plain data at all.

Building is deterministic: the same bytes build the same graph, so a target can build a value
twice and hand each copy to one of two implementations it compares. No value runs code of its
own when read (no subclass here overrides a method): the renderer's refusal to run such code is
tested in ``tests/test_render_paths.py``; here the point is what the readers do with the types.
"""

from __future__ import annotations

from typing import Any

import atheris

WORDS = (
    "type", "text", "image", "audio", "resource", "resource_link", "reference", "data",
    "mimeType", "uri", "blob", "disposition", "name", "size", "id", "title", "description",
    "_meta", "annotations", "content", "structuredContent", "isError", "never", "Never",
    " NEVER ", "ref", "", " ", "\t", "image/png", "text/plain", "audio/wav", "AAAA",
    "ref:001/x", "ref:002/x", "https://h/ref:003/x", "https://u:p@h/ref:004/x", "ref:005/x?q",
    "emb:001/x", "mem://1", "\ud800", "\udfff", "é", "Ā", "\u202e", "\u200b", "\x00", "\n",
    "🙂", "x" * 300,
)  # fmt: skip
"""Strings the walks compare against, and strings that make a walk take another branch."""

KINDS = ("text", "image", "audio", "resource", "resource_link", "reference")
KEYS = ("type", "text", "data", "mimeType", "uri", "resource", "blob", "disposition", "name",
        "size", "id", "_meta", "annotations")  # fmt: skip
URIS = ("ref:001/x", "ref:002/x", "https://h/ref:003/x", "https://u:p@h/ref:004/x",
        "ref:005/x?q", "emb:001/x", "HTTPS://H/ref:003/x", "")  # fmt: skip
"""Uris the targets' registries hold records for (and near misses): links share records and
a never of one block claims another's uri."""


class Str(str):
    __slots__ = ()


class Int(int):
    __slots__ = ()


class Float(float):
    __slots__ = ()


class Bytes(bytes):
    __slots__ = ()


class Dict(dict[Any, Any]):
    __slots__ = ()


class List(list[Any]):
    __slots__ = ()


class Tuple(tuple[Any, ...]):
    __slots__ = ()


class Opaque:
    """An object that is no plain data (a Python tool may return anything)."""

    __slots__ = ()


MAX_NODES = 400
"""Containers and leaves one value holds at most (past it, leaves only): a few hundred keep an
execution fast, and the walks' own node budget is tested in ``tests/``."""


class Builder:
    """Builds values from ``data`` (see the module doc)."""

    def __init__(self, data: bytes) -> None:
        self.fdp = atheris.FuzzedDataProvider(data)
        self.pool: list[Any] = []
        """Containers built so far (some not yet filled): what an alias or a cycle reuses. A
        caller drops it (:meth:`done`) before reading the value, so that reference counts are
        the value's own."""
        self.nodes = 0

    def done(self) -> None:
        self.pool.clear()

    def byte(self) -> int:
        return self.fdp.ConsumeIntInRange(0, 255)

    def pick(self, choices: tuple[Any, ...]) -> Any:
        return choices[self.fdp.ConsumeIntInRange(0, len(choices) - 1)]

    def text(self) -> str:
        how = self.byte() % 8
        if how < 3:
            return str(self.pick(WORDS))
        if how == 3:  # two words spliced: "text" + "\x00" + "Ā", "never" + " ", ...
            return str(self.pick(WORDS)) + str(self.pick(WORDS))
        if how == 4:
            return str(self.pick(WORDS)) + self.fdp.ConsumeUnicode(self.byte() % 8)
        if how == 5:
            return self.fdp.ConsumeUnicodeNoSurrogates(self.byte() % 16)
        return self.fdp.ConsumeUnicode(self.byte() % 24)

    def leaf(self) -> Any:
        how = self.byte() % 13
        if how == 0:
            return None
        if how == 1:
            return self.fdp.ConsumeBool()
        if how == 2:
            return self.fdp.ConsumeIntInRange(-3, 300)
        if how == 3:  # 64 bits and past them: the views' INT_MIN..INT_MAX edge
            return self.fdp.ConsumeInt(1 + self.byte() % 24)
        if how == 4:
            return (
                self.fdp.ConsumeRegularFloat()
                if self.fdp.ConsumeBool()
                else (self.pick((float("nan"), float("inf"), float("-inf"), -0.0, 1e308)))
            )
        if how == 5:
            return self.fdp.ConsumeBytes(self.byte() % 8)
        if how == 6:
            return self.subclassed()
        if how == 7:
            return Opaque()
        return self.text()

    def subclassed(self) -> Any:
        how = self.byte() % 5
        if how == 0:
            return Str(self.text())
        if how == 1:
            return Int(self.fdp.ConsumeInt(2))
        if how == 2:
            return Float(self.fdp.ConsumeRegularFloat())
        if how == 3:
            return Bytes(self.fdp.ConsumeBytes(3))
        return Str(self.pick(KINDS))

    def key(self) -> Any:
        how = self.byte() % 10
        if how < 6:
            return self.pick(KEYS)
        if how == 6:
            return self.text()
        if how == 7:
            return Str(self.pick(KEYS))  # a subclass equal to, and hashing as, a key looked up
        if how == 8:
            return self.pick((0, 1, -1, True, False, None, 1.5, 2**70))
        return self.leaf() if self.fdp.ConsumeBool() else self.pick(KEYS)

    def value(self, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or self.fdp.remaining_bytes() == 0:
            return self.leaf()
        how = self.byte() % 16
        if how < 6:
            return self.leaf()
        if how < 8:
            return self.block(depth)
        if how == 8:
            return self.dict(depth)
        if how in (9, 10):
            return self.sequence(depth)
        if how == 11 and self.pool:  # an alias, or (for one not yet filled) a cycle
            return self.pool[self.fdp.ConsumeIntInRange(0, len(self.pool) - 1)]
        if how == 12:  # deep: a chain of lists around one value, near the depth limit
            inner = self.value(depth + 1)
            for _ in range(self.fdp.ConsumeIntInRange(90, 105)):
                inner = [inner]
            return inner
        if how == 13:
            return self.uri()
        return self.leaf()

    def uri(self) -> str:
        return str(self.pick(URIS)) if self.fdp.ConsumeBool() else self.text()

    def dict(self, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = Dict() if self.byte() % 9 == 0 else {}
        self.pool.append(out)
        for _ in range(self.byte() % 6):
            out[self.key()] = self.value(depth + 1)
        return out

    def sequence(self, depth: int) -> Any:
        items: list[Any] = List() if self.byte() % 9 == 0 else []
        as_tuple = self.fdp.ConsumeBool()
        if not as_tuple:
            self.pool.append(items)
        for _ in range(self.byte() % 6):
            items.append(self.value(depth + 1))
        if as_tuple:
            return Tuple(items) if self.byte() % 9 == 0 else tuple(items)
        return items

    def block(self, depth: int) -> dict[Any, Any]:
        """A dict of a block's shape: a type, then the fields its kind reads (each one sent or
        left out, of the right type or not), then anything else."""
        out: dict[Any, Any] = Dict() if self.byte() % 13 == 0 else {}
        self.pool.append(out)
        kind = self.pick(KINDS) if self.byte() % 8 else self.leaf()
        fields: dict[str, Any] = {
            "text": ("text",),
            "image": ("data", "mimeType"),
            "audio": ("data", "mimeType"),
            "resource": ("resource",),
            "resource_link": ("uri", "name"),
            "reference": ("id",),
        }
        if self.fdp.ConsumeBool():
            out["type"] = kind
        for name in fields.get(kind, ()) if type(kind) is str else ():
            if self.byte() % 6:
                out[name] = self.field(name, depth)
        if self.byte() % 3 == 0:
            out["disposition"] = self.pick(("never", " Never", "NEVER ", "ref", None))
        if self.byte() % 4 == 0:
            out["uri"] = self.uri()
        for _ in range(self.byte() % 4 if self.byte() % 3 == 0 else 0):
            out[self.key()] = self.value(depth + 1)
        if "type" not in out and self.fdp.ConsumeBool():
            out["type"] = kind  # last, not first
        return out

    def field(self, name: str, depth: int) -> Any:
        how = self.byte() % 5
        if how == 0:
            return self.value(depth + 1)
        if name == "resource":
            record: dict[Any, Any] = {}
            self.pool.append(record)
            for key in ("uri", "text", "blob", "mimeType"):
                if self.byte() % 3:
                    record[key] = self.uri() if key == "uri" else self.value(depth + 2)
            return record
        if name == "uri":
            return self.uri()
        if name == "mimeType":
            return self.pick(("image/png", "", " ", "\t\n", "audio/wav", "\u2003", "x"))
        if name == "id":
            return self.pick(("ref_forged", "", "ref_0"))
        return self.text()

    def content(self) -> Any:
        """A content array: a list (or tuple) of blocks, mostly."""
        items: list[Any] = []
        self.pool.append(items)
        for _ in range(self.byte() % 12):
            items.append(self.block(1) if self.byte() % 4 else self.value(1))
        if self.byte() % 5 == 0 and items:
            items.append(items[self.fdp.ConsumeIntInRange(0, len(items) - 1)])  # listed twice
        return tuple(items) if self.byte() % 4 == 0 else items

    def result(self) -> Any:
        """A tool result: a dict with ``content``, maybe ``structuredContent``, ``isError``
        and ``_meta`` (aliasing the content's blocks at times), or now and then anything."""
        if self.byte() % 16 == 0:
            return self.value()
        top: dict[Any, Any] = {}
        self.pool.append(top)
        top["content"] = self.content() if self.byte() % 8 else self.value(1)
        for name in ("structuredContent", "isError", "_meta"):
            if self.byte() % 3 == 0:
                top[name] = self.value(1)
        return top


def registry() -> Any:
    """A registry holding a record for most of :data:`URIS`, one of them marked never (by a
    result that claims it so) and one with a saved copy: links in a built value find records,
    marked or not, saved or not, and some find none."""
    from scriptbridge import ReferenceRegistry

    reg = ReferenceRegistry()
    reg.set_removal_hook(lambda path: None)
    links = [{"type": "resource_link", "uri": uri, "name": f"n{n}"} for n, uri in enumerate(URIS)]
    reg.ingest({"content": links[:5]}, server="a")
    reg.ingest({"content": [{**links[1], "disposition": "never"}]}, server="b")
    record = reg.record_for(URIS[2])
    if record is not None:
        reg.record_saved(record, f"refs/{record.id}.bin", 1, "0" * 64)
    return reg
