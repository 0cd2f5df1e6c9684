"""The wire shapes of content blocks (SPEC section 1) and the shapes of a script's view.

Wire shapes are what a server *should* send; nothing here trusts that it did. The classifier
(:mod:`scriptbridge._classify`) reads blocks field by field with explicit type checks and never
raises on a wrong type, so these ``TypedDict`` s document the fields it looks at rather than
gate them. The view shapes are what :func:`scriptbridge.render_script_view` promises to produce,
and :data:`SCRIPT_VIEW` (a pydantic ``TypeAdapter``) validates a view strictly against them.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

BLOCK_TYPES: Final = frozenset({"text", "image", "audio", "resource", "resource_link", "reference"})
"""The ``type`` values that make a dict a block, at the top of a content array or at depth."""


# --- on the wire ---------------------------------------------------------------------------


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class InlineBlock(TypedDict):
    """An image or audio block carrying its data (``data`` is base64)."""

    type: Literal["image", "audio"]
    data: str
    mimeType: str
    disposition: NotRequired[str | None]


class ByUriBlock(TypedDict):
    """An image or audio block that names its data by uri: read as a reference."""

    type: Literal["image", "audio"]
    uri: str
    mimeType: NotRequired[str]
    disposition: NotRequired[str | None]


class ResourceLinkBlock(TypedDict):
    type: Literal["resource_link"]
    uri: str
    name: str
    mimeType: NotRequired[str]
    size: NotRequired[int]
    disposition: NotRequired[str | None]


class ReferenceBlock(TypedDict):
    """An MCPL reference: a ``resource`` block with a uri of its own."""

    type: Literal["resource"]
    uri: str
    mimeType: NotRequired[str]
    name: NotRequired[str]
    size: NotRequired[int]
    disposition: NotRequired[str | None]
    expires: NotRequired[str]


class EmbeddedRecord(TypedDict):
    uri: str
    mimeType: NotRequired[str]
    text: NotRequired[str]
    blob: NotRequired[str]


class EmbeddedResourceBlock(TypedDict):
    """MCP's embedded resource: a ``resource`` block with no uri of its own."""

    type: Literal["resource"]
    resource: EmbeddedRecord


# --- in a script's view ----------------------------------------------------------------------

_STRICT: Final = ConfigDict(extra="forbid", strict=True)


@with_config(_STRICT)
class ViewText(TypedDict):
    type: Literal["text"]
    text: str


@with_config(_STRICT)
class ViewInline(TypedDict):
    type: Literal["image", "audio"]
    data: str
    mimeType: str


@with_config(_STRICT)
class ViewReference(TypedDict):
    """A reference as a script sees it; ``uri`` is present only where it may be shown."""

    type: Literal["reference"]
    id: str | None
    name: str | None
    mimeType: str | None
    size: int | None
    uri: NotRequired[str]
    savedTo: str | None
    unfetchable: str | None


ViewBlock = ViewText | ViewInline | ViewReference


@with_config(_STRICT)
class ScriptView(TypedDict):
    content: list[ViewBlock]
    data: Any
    isError: bool


SCRIPT_VIEW: Final[TypeAdapter[ScriptView]] = TypeAdapter(ScriptView)
"""Validates a rendered view: the content array's blocks exactly as SPEC 6.1 shapes them."""
