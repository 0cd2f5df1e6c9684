"""The one classifier every lane uses (SPEC section 2).

:func:`classify_block` reads one block (any Python value) and returns one of a closed set of
value classes, the :data:`Classification` union. Every lane switches over it with ``match``
and ends in ``typing.assert_never``, so mypy proves that no kind falls through to a default.

Classification is pure and total: it reads a few fields with explicit type checks, never
raises, never mutates, and costs time linear in the block's own strings (a blob's size is
counted without decoding it). It does not walk nested data: walks live in ``_claims`` and
``_render``.

Choices where SPEC is silent, written down here:

- A ``disposition`` is read on the outer block only. It *claims* a disposition when present and
  not ``None``; it is ``never`` when it is a string equal to ``"never"`` ignoring case and
  surrounding whitespace (confidentiality first: a server that wrote ``"Never"`` meant it).
- A media type counts only when it is a string with something in it besides whitespace: inline
  data whose ``mimeType`` is ``""`` shows ``INLINE_NO_MEDIA_TYPE``, as an embedded blob's shows
  ``EMBEDDED_NO_MEDIA_TYPE``.
- An image or audio block with neither string ``data`` nor a uri of its own is unknown, as is a
  text block whose ``text`` is not a string.
- A ``resource_link`` without a uri of its own is a reference without a link.
- ``size`` counts only as a non-negative ``int`` (``bool`` excluded); ``name``, ``mimeType`` and
  ``expires`` only as strings.

The classification classes are values: treat them as immutable. They are not ``frozen``
dataclasses only because a frozen init costs about five times as much, and every block of every
result is classified (measured in ``benchmarks/render.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from . import markers
from ._blocks import BLOCK_TYPES
from ._plain import INT_MAX

MediaKind = Literal["image", "audio"]

_SHOWABLE_MEDIA: Final = re.compile(r"(image|audio)/[^/]", re.IGNORECASE)


@dataclass(slots=True)
class Text:
    """Kind 1: text (raw; lanes make it well formed where it leaves the library)."""

    text: str


@dataclass(slots=True)
class Inline:
    """Kind 2: inline image or audio data with a media type (``data`` may be empty)."""

    kind: MediaKind
    data: str
    mime: str


@dataclass(slots=True)
class InlineNoMediaType:
    """Kind 2: inline data that arrived without a usable media type."""

    kind: MediaKind


@dataclass(slots=True)
class Withheld:
    """Kind 3: inline data or an embedded resource that claims a disposition.

    ``never_uri`` is the uri its ``never`` claims (``None`` when it claims no never, or names no
    non-empty uri). ``embedded`` says it is an embedded resource, which no walk reads into.
    """

    never_uri: str | None
    embedded: bool


@dataclass(slots=True)
class Reference:
    """Kinds 4 and 5: a reference to a uri (MCPL reference, resource link, by-uri image/audio)."""

    source: Literal["resource", "resource_link", "image", "audio"]
    uri: str
    name: str | None
    mime: str | None
    size: int | None
    never: bool
    expires: str | None


@dataclass(slots=True)
class Marker:
    """Embedded contents no lane shows as themselves: the marker text they show instead."""

    text: str


EmbeddedContents = Text | Inline | Marker
"""What an embedded resource's contents show as: the ordinary block they make, or a marker."""


@dataclass(slots=True)
class Embedded:
    """Kind 6: MCP's embedded resource. ``uri`` is never shown anywhere."""

    uri: str
    contents: EmbeddedContents


@dataclass(slots=True)
class NoLink:
    """Kind 7: a resource block with no uri of its own and no usable embedded record."""


@dataclass(slots=True)
class ScriptObject:
    """A ``{"type": "reference", "id": ...}`` dict: a script object only if the id is registered.

    Lanes resolve ``ref_id`` against the registry and show an unknown block when it names no
    record (a server may forge such a dict).
    """

    ref_id: str


@dataclass(slots=True)
class Unknown:
    """Kind 8: any other type, a malformed block of a known type, or a non-dict."""


Classification = (
    Text
    | Inline
    | InlineNoMediaType
    | Withheld
    | Reference
    | Embedded
    | NoLink
    | ScriptObject
    | Unknown
)
"""What :func:`classify_block` returns: one of these frozen classes for every Python value."""

_UNKNOWN: Final = Unknown()
_NO_LINK: Final = NoLink()


def is_block(value: object) -> bool:
    """Whether ``value`` is a dict whose ``type`` is a block type (a block at depth)."""
    if not isinstance(value, dict):
        return False
    kind = dict.get(value, "type")  # never a subclass's own get
    return isinstance(kind, str) and kind in BLOCK_TYPES


def exact_str(value: object) -> str | None:
    """``value`` as an exact ``str`` when it is a string, else ``None``.

    A ``str`` subclass is copied down with ``str.__str__`` (none of its own methods runs), and an
    object that only claims to be a string (a ``__class__`` property) is no string: its real
    type is asked, never its ``__class__``.
    """
    if type(value) is str:
        return value
    if issubclass(type(value), str):
        return str.__str__(value)
    return None


def is_never(disposition: object) -> bool:
    """Whether a disposition value says ``never`` (any case, surrounding whitespace ignored)."""
    text = exact_str(disposition)
    return text is not None and text.strip().casefold() == "never"


def own_uri(value: object) -> str | None:
    """A uri of its own: a non-empty string (an exact ``str``), else ``None``."""
    return exact_str(value) or None


def _text_or_none(value: object) -> str | None:
    return exact_str(value)


def _media_type(value: object) -> str | None:
    text = exact_str(value)
    return text if text is not None and text.strip() else None


def _size(value: object) -> int | None:
    """A size as an exact ``int`` the channel carries (0 to 2**64 - 1), else ``None``; an
    ``int`` subclass is read with ``int.__int__``, none of its own methods called."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    exact = value if type(value) is int else int.__int__(value)
    return exact if 0 <= exact <= INT_MAX else None


def classify_block(block: object) -> Classification:
    """Classify one block; total over every Python value, pure, and never raises.

    A dict subclass whose methods raise (a Python tool's object) classifies as unknown.
    """
    if not isinstance(block, dict):
        return _UNKNOWN
    try:
        return _classify_dict(block)
    except Exception:
        return _UNKNOWN


def _classify_dict(block: dict[Any, Any]) -> Classification:
    match block.get("type"):
        case "text":
            text = exact_str(block.get("text"))
            return Text(text) if text is not None else _UNKNOWN
        case "image":
            return _classify_media("image", block)
        case "audio":
            return _classify_media("audio", block)
        case "resource_link":
            uri = own_uri(block.get("uri"))
            return _reference("resource_link", uri, block) if uri is not None else _NO_LINK
        case "resource":
            return _classify_resource(block)
        case "reference":
            ref_id = exact_str(block.get("id"))
            return ScriptObject(ref_id) if ref_id else _UNKNOWN
        case _:
            return _UNKNOWN


def _reference(
    source: Literal["resource", "resource_link", "image", "audio"],
    uri: str,
    block: dict[Any, Any],
) -> Reference:
    # Positional (a keyword call costs more); the fields are read in the order they are listed.
    return Reference(
        source,
        uri,
        _text_or_none(block.get("name")),
        _media_type(block.get("mimeType")),
        _size(block.get("size")),
        is_never(block.get("disposition")),
        _text_or_none(block.get("expires")),
    )


def _classify_media(kind: MediaKind, block: dict[Any, Any]) -> Classification:
    data = exact_str(block.get("data"))
    uri = own_uri(block.get("uri"))
    if data is not None:
        disposition = block.get("disposition")
        if disposition is not None:
            return Withheld(never_uri=uri if is_never(disposition) else None, embedded=False)
        mime = _media_type(block.get("mimeType"))
        return Inline(kind, data, mime) if mime is not None else InlineNoMediaType(kind)
    if uri is not None:
        return _reference(kind, uri, block)
    return _UNKNOWN


def _classify_resource(block: dict[Any, Any]) -> Classification:
    uri = own_uri(block.get("uri"))
    if uri is not None:
        return _reference("resource", uri, block)
    record = block.get("resource")
    if not isinstance(record, dict):
        return _NO_LINK
    record_uri = exact_str(record.get("uri"))
    if record_uri is None:
        return _NO_LINK
    disposition = block.get("disposition")
    if disposition is not None:
        never_uri = record_uri if is_never(disposition) and record_uri else None
        return Withheld(never_uri=never_uri, embedded=True)
    return Embedded(record_uri, embedded_contents(record))


def embedded_contents(record: dict[Any, Any]) -> EmbeddedContents:
    """What an embedded resource's record shows as (SPEC section 2, kind 6)."""
    text = exact_str(record.get("text"))
    blob = exact_str(record.get("blob"))
    if (text is None) == (blob is None):
        return Marker(markers.EMBEDDED_UNREADABLE)
    if text is not None:
        return Text(text)
    assert blob is not None
    mime = _media_type(record.get("mimeType"))
    if mime is None:
        return Marker(markers.EMBEDDED_NO_MEDIA_TYPE)
    showable = _SHOWABLE_MEDIA.match(mime)
    if showable is None:
        return Marker(markers.embedded_unshowable(mime, markers.decoded_size(blob)))
    media: MediaKind = "image" if showable.group(1).lower() == "image" else "audio"
    return Inline(media, blob, mime)
