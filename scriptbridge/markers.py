"""Every marker and notice a lane or a script can show, with the helpers that build them.

The strings here are part of the behaviour contract (SPEC section 2): lanes, the script view and
the fetcher import them from this module and nowhere else. Each fixed text is a named constant;
each text that names a media type or a size is a function of its arguments.

Helpers:

- :func:`well_formed` replaces every lone surrogate with U+FFFD, so any text that leaves the
  library encodes as UTF-8.
- :func:`clean_label` is the media-type (and name) cleaner: control and format characters
  removed (bidi overrides included), whitespace collapsed, cut at a bound, made well formed.
  :func:`is_clean` tells, cheaply, when a text has nothing to clean.
- :func:`size_label` is ``~NB`` under 1,024 bytes, ``~NKB`` (rounded, at least 1) under 1 MiB,
  otherwise ``~N.NMB``.
- :func:`decoded_size` is a base64 string's decoded size, computed without decoding it.

Beyond SPEC's table this module adds ``UNREADABLE_VALUE``, shown in place of a value that is not
plain data (an object a Python tool returned that no walk can read), and the reasons a fetch
can't be served (plain sentences without a trailing period, for :func:`fetch_refused` and
:func:`fetch_failed`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final, Literal

__all__ = [
    "BAD_BLOB",
    "BAD_URL",
    "CLOSED",
    "DATA_SCHEME",
    "DATA_TOO_DEEP",
    "EMBEDDED_NO_MEDIA_TYPE",
    "EMBEDDED_UNREADABLE",
    "ENCODED",
    "FETCH_HINT",
    "FILE_SCHEME",
    "INLINE_NO_MEDIA_TYPE",
    "MARKS_LANDING",
    "NOT_CONNECTED",
    "NO_LONGER_HELD",
    "NO_SCHEME",
    "NO_SERVER",
    "PAYLOAD_NEVER",
    "REASON_MAX_CHARS",
    "REDIRECT_SCHEME",
    "REFERENCE_NO_LINK",
    "REFERENCE_UNREGISTERED",
    "SERVER_ANSWER",
    "SERVER_FAILED",
    "SYSTEM_TEXT_ONLY",
    "UNKNOWN_BLOCK",
    "UNREACHABLE",
    "UNREADABLE_RESULT",
    "UNREADABLE_VALUE",
    "WITHHELD_DISPOSITION",
    "WORKSPACE_FAILED",
    "audio_in_tool_result",
    "clean_label",
    "deadline_passed",
    "declared_too_large",
    "decoded_size",
    "embedded_unshowable",
    "fetch_failed",
    "fetch_limit",
    "fetch_refused",
    "http_status",
    "image_placeholder",
    "inline_no_data",
    "is_clean",
    "length_mismatch",
    "one_line",
    "over_cap",
    "over_declared",
    "reference_stub",
    "refused_address",
    "size_label",
    "too_many_redirects",
    "under_declared",
    "well_formed",
]

REFERENCE_NO_LINK: Final = "[Reference not shown: it arrived without a link.]"
EMBEDDED_NO_MEDIA_TYPE: Final = "[Resource not shown: its data arrived without a media type.]"
EMBEDDED_UNREADABLE: Final = (
    "[Resource not shown: its contents arrived as neither text nor data, or as both.]"
)
PAYLOAD_NEVER: Final = "a server asked that its content never reach you or your tools"
SYSTEM_TEXT_ONLY: Final = "[image block not shown: the system prompt carries text only.]"
WITHHELD_DISPOSITION: Final = "[Content withheld: inline content can't carry a disposition.]"
UNKNOWN_BLOCK: Final = "[Block not shown: this host doesn't know its type.]"
INLINE_NO_MEDIA_TYPE: Final = "[Data not shown: it arrived without a media type.]"
DATA_TOO_DEEP: Final = "[Data not shown: it is nested deeper than this host reads.]"
UNREADABLE_VALUE: Final = "[Data not shown: this host can't read a value of its kind.]"
REFERENCE_UNREGISTERED: Final = "the host didn't register this reference"
UNREADABLE_RESULT: Final = (
    "its result couldn't be read whole for a server's never, so nothing in it is fetched"
)
FETCH_HINT: Final = "not fetched yet; fetch it by its id to read it"
MARKS_LANDING: Final = "a result's never marks were still being applied when this was shown"

MEDIA_TYPE_MAX_CHARS: Final = 100
"""Where :func:`clean_label` cuts a media type."""

_KIB: Final = 1024
_MIB: Final = 1024 * 1024


REASON_MAX_CHARS: Final = 500
"""Where :func:`one_line` cuts a reason."""


def one_line(text: str) -> str:
    """The first line of ``text`` (``"it failed"`` when it has none), cut to
    :data:`REASON_MAX_CHARS` and made well formed: how a failure's reason reaches a script."""
    stripped = text.strip()
    line = stripped.splitlines()[0] if stripped else "it failed"
    return well_formed(line[:REASON_MAX_CHARS])


def well_formed(text: str) -> str:
    """Return ``text`` with every lone surrogate replaced by U+FFFD.

    The result always encodes as UTF-8. Linear in ``len(text)``; returns ``text`` itself when it
    is already well formed. An exact ``str`` that is all ASCII (a flag CPython keeps, so the
    check costs nothing) is returned at once; anything else is encoded to find out.
    """
    if type(text) is str and text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_WHITESPACE: Final = re.compile(r"\s+")


@functools.cache
def _invisible() -> re.Pattern[str]:
    """A character class of every control (Cc) and format (Cf) code point, built once.

    Cc and Cf live in planes 0, 1 and 14 only, so only those are scanned (about 10 ms).
    """
    ranges: list[list[int]] = []
    for code in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(code)) in ("Cc", "Cf"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    body = "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in ranges)
    return re.compile(f"[{body}]")


def clean_label(text: str, limit: int = MEDIA_TYPE_MAX_CHARS) -> str:
    """Clean a server-sent label (a media type or a name) for showing in a marker.

    Control and format characters (bidi overrides, zero-width characters) are removed,
    whitespace runs collapse to one space and the ends are stripped, the text is cut at
    ``limit`` characters, and the result is made well formed. Linear in ``len(text)``; never
    raises.

    An exact ``str`` of printable ASCII with no leading, trailing or doubled space has nothing
    to clean, so it is only cut (the result is the same as the full cleaning's).
    """
    if is_clean(text):
        return text[:limit]
    visible = _invisible().sub("", text)
    collapsed = _WHITESPACE.sub(" ", visible).strip()
    return well_formed(collapsed[:limit])


def is_clean(text: str) -> bool:
    """Whether :func:`clean_label` would leave ``text`` as it is (but for the cut). Constant time
    for non-ASCII text, linear in ``len(text)`` otherwise; never raises.

    True only for an exact ``str`` (a subclass's methods are never called) of printable ASCII,
    U+0020 to U+007E, whose only whitespace, the space, never starts, ends or doubles: such text
    holds no control or format character, no whitespace run to collapse, nothing to strip and
    no lone surrogate.
    """
    return (
        type(text) is str
        and text.isascii()
        and text.isprintable()
        and "  " not in text
        and text.strip(" ") == text
    )


def size_label(size: int) -> str:
    """Return a size in bytes as ``~NB``, ``~NKB`` (rounded, at least 1) or ``~N.NMB``."""
    size = max(0, size)
    if size < _KIB:
        return f"~{size}B"
    if size < _MIB:
        return f"~{max(1, (size + _KIB // 2) // _KIB)}KB"
    return f"~{size / _MIB:.1f}MB"


def decoded_size(blob: str) -> int:
    """Return how many bytes the base64 text ``blob`` decodes to, without decoding it.

    Whitespace is ignored and trailing ``=`` padding subtracted, so a well-formed blob gets its
    exact decoded size. Malformed base64 gets the size its length implies. Linear in
    ``len(blob)``, with no copy of the blob; never raises.
    """
    length = len(blob)
    for space in " \t\r\n\f\v":
        length -= blob.count(space)
    tail = blob[-16:].rstrip()
    padding = len(tail) - len(tail.rstrip("="))
    return max(0, length * 3 // 4 - min(padding, 2))


def _media(mime: str, size: int) -> str:
    return f"{clean_label(mime)}, {size_label(size)}"


def embedded_unshowable(mime: str, size: int) -> str:
    """The marker for an embedded blob of a type no lane shows; ``size`` is its decoded size."""
    return f"[Resource not shown: this host can't display its data ({_media(mime, size)}).]"


def inline_no_data(kind: Literal["image", "audio"]) -> str:
    """The model lanes' marker for inline image or audio data that arrived empty."""
    return f"[{kind} not shown: it arrived without data.]"


def audio_in_tool_result(mime: str, size: int) -> str:
    """The tool-result lanes' marker for audio, which those lanes don't carry."""
    return (
        "[Audio not shown: this host's tool results carry text and images only "
        f"({_media(mime, size)}).]"
    )


def image_placeholder(mime: str, size: int) -> str:
    """The stored copy's placeholder for an image, e.g. ``[image: image/png, ~3KB]``."""
    return f"[image: {_media(mime, size)}]"


def reference_stub(
    ref_id: str | None,
    name: str | None,
    mime: str | None,
    size: int | None,
    tail: str,
) -> str:
    """A reference's stub line.

    For example ``[reference ref_9f2c: report.pdf (application/pdf, ~12KB) — TAIL]``.
    ``tail`` is ``saved: refs/...``, :data:`FETCH_HINT`, :data:`PAYLOAD_NEVER` or another
    unfetchable reason. The id, name, media type and size are each left out when unknown
    (``None`` or blank after cleaning). The whole line is well formed.
    """
    head = "[reference"
    if ref_id:
        head += f" {clean_label(ref_id)}"
    label = clean_label(name, limit=200) if name else ""
    if label:
        head += f": {label}"
    facts = [clean_label(mime)] if mime and clean_label(mime) else []
    if size is not None:
        facts.append(size_label(size))
    if facts:
        head += f" ({', '.join(facts)})"
    return well_formed(f"{head} — {tail}]")


def fetch_refused(ref_id: str, reason: str) -> str:
    """The host-facing answer to a fetch that will never be served, e.g. a never-marked record.

    ``couldn't fetch "<id>": <reason>. Calling again won't change that.``
    """
    return well_formed(f"couldn't fetch \"{ref_id}\": {reason}. Calling again won't change that.")


def fetch_failed(ref_id: str, reason: str) -> str:
    """The host-facing answer to a fetch that failed but may succeed later (a deadline, a
    server not connected yet): ``couldn't fetch "<id>": <reason>.``"""
    return well_formed(f'couldn\'t fetch "{ref_id}": {reason}.')


# --- why a fetch can't be served ---------------------------------------------------------------
# Plain sentences without a trailing period: each ends up in fetch_refused or fetch_failed.

NO_LONGER_HELD: Final = "the host no longer holds this reference"
NO_SCHEME: Final = "its link has no scheme this host can read"
FILE_SCHEME: Final = "it links to a local file, which this host never reads"
DATA_SCHEME: Final = "it is a data: link, whose contents this host doesn't fetch"
BAD_URL: Final = "its link isn't a valid web address"
UNREACHABLE: Final = "its server couldn't be reached or broke off the transfer"
ENCODED: Final = "its server sent it compressed although this host asked for it plain"
REDIRECT_SCHEME: Final = "it redirected to a link this host doesn't follow"
NOT_CONNECTED: Final = "the server that sent it isn't connected"
NO_SERVER: Final = "it came from no server this host can read it through"
SERVER_FAILED: Final = "its server couldn't read it"
SERVER_ANSWER: Final = "its server's answer held no readable contents for it"
BAD_BLOB: Final = "its server's answer held data that isn't valid base64"
WORKSPACE_FAILED: Final = "the workspace couldn't hold its copy"
CLOSED: Final = "the host closed its fetcher"


def declared_too_large(size: int, cap: int) -> str:
    return f"it declares {size_label(size)}, more than the {size_label(cap)} this host fetches"


def over_cap(cap: int) -> str:
    return f"it is larger than the {size_label(cap)} this host fetches"


def over_declared(declared: int) -> str:
    return f"its server sent more than the {declared} bytes it declared"


def under_declared(got: int, declared: int) -> str:
    return f"its server sent {got} bytes where it declared {declared}"


def length_mismatch(length: int, declared: int) -> str:
    return f"its server announced {length} bytes where the reference declared {declared}"


def deadline_passed(seconds: float) -> str:
    return f"it didn't arrive within the {seconds:g} s this host waits"


def http_status(status: int) -> str:
    return f"its server answered HTTP {status}"


def refused_address(label: str, *, redirected: bool) -> str:
    verb = "it redirected to" if redirected else "it points to"
    return f"{verb} {label}, which this host doesn't fetch from"


def fetch_limit(limit: int) -> str:
    """This run already caused ``limit`` payload requests (``Limits.max_fetches``)."""
    return f"this run already fetched {limit} payloads, its limit"


def too_many_redirects(limit: int) -> str:
    return f"it redirected more than {limit} times"
