"""The script view's content loop, compiled: see ``_fastcontent.c`` and ``_render._read_blocks``."""

from collections.abc import Callable
from typing import Any

def configure(
    well_formed: Callable[[str], str],
    is_never: Callable[[object], bool],
    not_plain: type[Exception],
) -> None: ...
def read_blocks(
    blocks: list[Any] | tuple[Any, ...],
    shown: list[Any],
    links: list[int],
    waiting: list[int],
    never: dict[str, None],
    seen: set[int],
    record_views: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]],
    link_view: Callable[[str, bool], dict[str, Any] | None],
    other: Callable[[object], None],
) -> int: ...
