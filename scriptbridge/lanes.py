"""The model's lanes: what a host shows its model of a tool result or a pushed message (SPEC 6.2).

Every lane reads the one classifier (:func:`scriptbridge.classify_block`) through
:mod:`scriptbridge._lane_views`, which decides once what each block shows as; the functions
here only present it. They are pure: they read the registry (``record_for``, ``get``,
``is_marked``) and never change it, never change the result, do no I/O, and never raise on
hostile input (a result that still can't be read shows ``UNREADABLE_VALUE``, and the reason is
logged). Every string they return, alone or inside a block, is well formed (it encodes as
UTF-8).

What shows, on every lane:

- Text as text. Inline image data as an image (natively where the lane carries images, as its
  ``[image: <mime>, <size>]`` placeholder in a stored copy); audio natively on the push lanes and
  as :func:`~scriptbridge.markers.audio_in_tool_result` in a tool result, whose lanes carry text
  and images only. Image or audio data that decodes to nothing (``""`` above all) shows
  :func:`~scriptbridge.markers.inline_no_data` on every model lane.
- MCP's embedded resource as the block its contents make (its text, its image or audio), or its
  marker; one that claims a disposition as the withheld notice. Never its uri or its record.
- A reference as its stub line (:func:`~scriptbridge.markers.reference_stub`), whose tail is
  ``saved: <path>``, the fetch hint, ``PAYLOAD_NEVER`` (a marked record, or a uri a never of the
  same result names: such a link shows its stub, never its uri), ``UNREADABLE_RESULT`` (the
  result's claims couldn't be read whole) or ``REFERENCE_UNREGISTERED`` (the host showed the
  result before it ingested it). **No lane here ever shows a reference's uri**: SPEC allows
  showing none, the model fetches by id, and a uri can carry a credential no check can see.
- Unknown blocks, references without a link, inline data without a media type and data past a
  walk limit as their markers.

Choices where SPEC is silent:

- An error result keeps only its text blocks on every lane, and none of its data. So an error's
  words that come in an embedded text resource don't show: the result reads as having no words,
  as in the seed this follows.
- A result's data is ``structuredContent`` (or, as in the script view, ``data`` when it has no
  ``structuredContent``), shown only when the content array is empty or absent. Data that is itself
  a block shows as that block's text, not as a JSON string.
- :func:`live_copy` gives an empty result's data as one text block, cut at the cap like any text.
  When it falls back to the stored copy, that copy is given whole.
- :func:`convert_push` shows every reference, a by-uri image or audio included, as its stub,
  never as a url the provider would fetch. At the system position, image or audio data becomes
  ``SYSTEM_TEXT_ONLY``; a marker or stub is already text and stays.
- A reference's name or media type that holds its uri (as sent, or once cleaned) is left out of
  its stub, so a server can't show a uri another server's never withholds by naming it so.
- Image or audio data that decodes to no bytes (``""``, whitespace, a lone ``=``) counts as
  arriving without data on every lane, audio included (SPEC names the image case).
- "Blank" text (:func:`is_visibly_empty`) is text with nothing left once whitespace, control and
  format characters are removed.
- :func:`withheld_copy` (beyond API.md's list, for the host's guard) is the text counterpart of
  :func:`scriptbridge.render_withheld_view`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Final, assert_never

from . import markers
from ._classify import (
    Classification,
    Embedded,
    EmbeddedContents,
    Inline,
    InlineNoMediaType,
    Marker,
    NoLink,
    Reference,
    ScriptObject,
    Text,
    Unknown,
    Withheld,
    classify_block,
    is_block,
)
from ._lane_views import (
    LaneWalk,
    Shown,
    ShownMarker,
    ShownMedia,
    ShownText,
    has_data,
    stored_text,
)
from ._registry import ReferenceRegistry
from ._result_dict import data_of, result_dict
from ._walk import NODE_BUDGET

__all__ = [
    "DEFAULT_CAP",
    "convert_push",
    "is_visibly_empty",
    "live_copy",
    "shows_as_itself",
    "stored_copy",
    "withheld_copy",
]

log = logging.getLogger("scriptbridge.lanes")

DEFAULT_CAP: Final = 24_000
"""The live copy's default cap, in characters."""


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": markers.well_formed(text)}


def _failed(exc: Exception) -> str:
    log.error("a model lane couldn't read a result (%s); showed a marker", type(exc).__name__)
    return markers.UNREADABLE_VALUE


# --- tool results ----------------------------------------------------------------------------


def _shown_result(result: object, registry: ReferenceRegistry) -> tuple[list[Shown], str | None]:
    """What a tool result's content shows as, and its data's text (``None``: no data shows)."""
    top = result_dict(result)
    if top is None:
        return [ShownMarker(markers.UNKNOWN_BLOCK)], None
    walk = LaneWalk.of(registry, top)
    error = top.get("isError") is True
    blocks = top.get("content")
    shown = walk.content(blocks, text_only=error)
    empty = blocks is None or (isinstance(blocks, list | tuple) and len(blocks) == 0)
    if error or not empty:
        return shown, None
    data = data_of(top)
    return shown, None if data is None else walk.data_text(data)


def _joined(shown: list[Shown], data: str | None) -> str:
    texts = [stored_text(item) for item in shown]
    if data is not None:
        texts.append(data)
    return markers.well_formed("\n".join(texts))


def stored_copy(result: object, registry: ReferenceRegistry) -> str:
    """A tool result's stored copy (history): one well-formed string.

    Args:
        result: a tool result, as a dict or the ``mcp`` SDK's ``CallToolResult``.
        registry: the registry the result was ingested into (read, never changed).

    Returns:
        The texts its content's blocks show as, joined by newlines (never the content array's
        JSON): text as itself, an image as ``image_placeholder(mime, size)``, audio as
        ``audio_in_tool_result(mime, size)``, an embedded resource as its text, placeholder or
        marker, a reference as its stub line. When the content array is empty or absent, the
        data follows as JSON with every block at depth replaced by its text. An error result
        keeps only its text blocks (an error's words in an embedded text resource don't show).
        Never raises.
    """
    try:
        return _joined(*_shown_result(result, registry))
    except Exception as exc:
        return _failed(exc)


def live_copy(
    result: object, registry: ReferenceRegistry, cap: int = DEFAULT_CAP
) -> list[dict[str, Any]] | str:
    """A tool result as it is sent to the model now.

    Args:
        result: a tool result, as a dict or the ``mcp`` SDK's ``CallToolResult``.
        registry: the registry the result was ingested into (read, never changed).
        cap: characters; at least 1.

    Returns:
        A list of MCP-shaped blocks: ``{"type": "text", "text"}`` blocks, each text cut at
        ``cap`` on its own, and native ``{"type": "image", "data", "mimeType"}`` images. Audio
        shows as the tool-result lane's audio marker. Markers and stub lines are not cut; their
        lengths are added up, and when that total passes ``cap`` the result goes as its
        :func:`stored_copy` instead (a ``str``), so its images count as nothing beyond that
        text. An error result keeps only its text blocks. Never raises on hostile input.

    Raises:
        ValueError: ``cap`` is less than 1.
    """
    if cap < 1:
        raise ValueError("cap must be at least 1")
    try:
        shown, data = _shown_result(result, registry)
        blocks: list[dict[str, Any]] = []
        counted = 0
        for item in shown:
            match item:
                case ShownText(text):
                    blocks.append(_text_block(text[:cap]))
                case ShownMedia(kind="image", data=payload, mime=mime):
                    blocks.append({"type": "image", "data": payload, "mimeType": mime})
                case ShownMedia() | ShownMarker():
                    marker = stored_text(item)
                    counted += len(marker)
                    blocks.append(_text_block(marker))
                case unreachable:
                    assert_never(unreachable)
        if counted > cap:
            return _joined(shown, data)
        if data is not None:
            blocks.append(_text_block(data[:cap]))
        return blocks
    except Exception as exc:
        return [_text_block(_failed(exc))]


def withheld_copy(result: object, registry: ReferenceRegistry, keep: Iterable[str]) -> str:
    """The stored (and live) copy of a result whose body the host's guard refused.

    Mirrors :func:`scriptbridge.render_withheld_view`: the content is dropped; of the data, only
    the top-level fields named in ``keep`` are kept, as JSON with every block at depth replaced
    by its text (claims read from the whole result). Gives ``""`` when nothing is kept: when the
    data is not a dict, when it is a block (an embedded resource above all, whose fields can't be
    kept apart from its contents or its uri), when no named field is present, and for an error
    result (which keeps only its text blocks, here withheld). Never raises.
    """
    try:
        top = result_dict(result)
        if top is None or top.get("isError") is True:
            return ""
        data = data_of(top)
        if not isinstance(data, dict) or is_block(data):
            return ""
        picked = {name: data[name] for name in keep if isinstance(name, str) and name in data}
        if not picked:
            return ""
        return LaneWalk.of(registry, top).data_text(picked)
    except Exception as exc:
        return _failed(exc)


# --- push, channel and injection lanes --------------------------------------------------------


def convert_push(
    blocks: object, registry: ReferenceRegistry, position: str | None = None
) -> list[dict[str, Any]]:
    """Convert a push, channel or injection message's content blocks for the model.

    Args:
        blocks: the message's content array (``None`` is empty; anything but a list or tuple
            shows the unknown-block marker).
        registry: read for references' records and marks, never changed. The message's own
            claims are read too, so a never in it keeps a link of the same message to its stub.
        position: ``"system"`` for an injection into the system prompt, which carries text
            only; any other value changes nothing.

    Returns:
        MCP-shaped blocks: text as text; inline or embedded image and audio data natively
        (``{"type": "image"|"audio", "data", "mimeType"}``), or ``SYSTEM_TEXT_ONLY`` at the
        system position; every reference, a uri-only image whose record is marked never above
        all, as its stub text, never a url; markers as text. Never raises.
    """
    system = position == "system"
    try:
        walk = LaneWalk.of(registry, {"content": blocks})
        out: list[dict[str, Any]] = []
        for item in walk.content(blocks):
            match item:
                case ShownText(text) | ShownMarker(text):
                    out.append(_text_block(text))
                case ShownMedia(kind, data, mime):
                    if system:
                        out.append(_text_block(markers.SYSTEM_TEXT_ONLY))
                    else:
                        out.append({"type": kind, "data": data, "mimeType": mime})
                case unreachable:
                    assert_never(unreachable)
        return out
    except Exception as exc:
        return [_text_block(_failed(exc))]


def is_visibly_empty(blocks: object) -> bool:
    """Whether content holds nothing to see (a push or channel message like it is refused).

    True when every block is blank text or an embedded resource whose contents are blank text
    (``None`` and an empty array included). Blank: nothing left once whitespace, control and
    format characters are removed. Any other block (a marker or a stub shows), a non-list, or a
    block reached twice (it would show ``DATA_TOO_DEEP``) is something to see. Never raises.
    """
    if blocks is None:
        return True
    if not isinstance(blocks, list | tuple):
        return False
    try:
        items = list(blocks)
        if len(items) + 1 > NODE_BUDGET:
            return False
        seen: set[int] = set()
        for block in items:
            if isinstance(block, dict):
                if id(block) in seen:
                    return False
                seen.add(id(block))
            if not _blank_block(classify_block(block)):
                return False
        return True
    except Exception:
        return False


def _blank(text: str) -> bool:
    return not markers.clean_label(text, limit=1)


def _blank_block(classification: Classification) -> bool:
    match classification:
        case Text(text):
            return _blank(text)
        case Embedded(contents=contents):
            return _blank_contents(contents)
        case (
            Inline()
            | InlineNoMediaType()
            | Withheld()
            | Reference()
            | NoLink()
            | ScriptObject()
            | Unknown()
        ):
            return False
        case unreachable:
            assert_never(unreachable)


def _blank_contents(contents: EmbeddedContents) -> bool:
    match contents:
        case Text(text):
            return _blank(text)
        case Inline() | Marker():
            return False
        case unreachable:
            assert_never(unreachable)


def shows_as_itself(block: object) -> bool:
    """Whether a block of a render result shows as itself rather than as a marker or a stub.

    True for a text block, for inline image or audio data with a media type and a payload, and
    for an embedded resource whose contents are text or such data. False for everything shown
    as a placeholder: a reference (its stub), empty data (its no-data marker), an embedded
    resource shown as its marker, withheld data, unknown blocks. Never raises.
    """
    match classify_block(block):
        case Text():
            return True
        case Inline(data=data):
            return has_data(data)
        case Embedded(contents=contents):
            return _contents_show_as_themselves(contents)
        case InlineNoMediaType() | Withheld() | Reference() | NoLink() | ScriptObject() | Unknown():
            return False
        case unreachable:
            assert_never(unreachable)


def _contents_show_as_themselves(contents: EmbeddedContents) -> bool:
    match contents:
        case Text():
            return True
        case Inline(data=data):
            return has_data(data)
        case Marker():
            return False
        case unreachable:
            assert_never(unreachable)
