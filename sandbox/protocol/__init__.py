"""What the host and the sandbox share: the messages, their framing and plain data. Sans-I/O.

Both sides import this package. The child imports it from inside the sandbox, so it imports
nothing from ``scriptbridge``, and it does no I/O: it turns messages into bytes and bytes into
messages, and the caller moves the bytes (the child with :class:`sandbox.BlockingChannel`, the
host with its event loop). Each concern is a module of its own: plain data (:mod:`._plain`),
framing (:mod:`._framing`), the names and bounds both sides share (:mod:`._names`), the
channel's messages (:mod:`._messages`) and the zygote's requests and replies
(:mod:`._zygote_messages`). The last two are pydantic models, which validate what the host
reads; they are loaded on first use, so the child (the zygote and every sandbox child), which
holds its messages as :mod:`sandbox._wire` does and imports only ``msgpack``, never loads
pydantic.

Framing
    Every message is one frame: a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes
    of msgpack. ``N`` is at least 1 and at most the receiver's limit, which is never above
    :data:`MAX_FRAME`. A receiver rejects an oversized prefix *before* it buffers the body.

Bodies
    A body is a msgpack map with an ``op`` key naming the message. Bodies are unpacked with
    ``raw=False`` (strings must be valid UTF-8), ``strict_map_key=True``, a buffer bound equal to
    the frame, and no extension types; then validated by pydantic (unknown ops, unknown fields,
    wrong types and out-of-range values are all refused). Every failure surfaces as one
    exception, :class:`ProtocolError`.

Plain data
    Payload fields typed :data:`PlainData` (tool arguments, tool views, inputs, the script's
    value) carry only ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list`` and
    ``dict`` with ``str`` keys, nested at most :data:`MAX_DATA_DEPTH` deep and at most
    :data:`MAX_DATA_NODES` nodes in one message.

Conversation (one run, one child, one script)::

    child                                   host
      | -- ready{pid, isolation, skipped} -->  |   after isolation, before the script is read
      | <-- start{source, inputs, tools, limits, carry}
      | -- output{text} ----------------------> |   any number, streamed, capped
      | -- call_tool{call_id, name, args} ----> |
      | <-- tool_result{call_id, view}          |   or tool_error{call_id, message}
      | -- call_tools{call_id, calls} --------> |
      | <-- tool_results{call_id, results}      |   one outcome per call, in order
      | -- fetch{call_id, ref_id} ------------> |
      | <-- fetch_result{call_id, saved_to | unfetchable}
      | -- carry{globals, definitions, dropped} |   a session's step only (start.carry set),
      |                                         |   once, before done; never before error
      | -- done{value, value_is_repr} --------> |   or error{type, message, line, phase}
      then the child exits.

The child has at most one request outstanding: after ``call_tool``, ``call_tools`` or ``fetch``
it reads exactly one answer, which must carry the same ``call_id`` and the matching op. Call
ids start at 1 and increase by one per request.
"""

import typing
from typing import Final

from .._endings import Ending as Ending
from ._framing import DEFAULT_FRAME_LIMIT as DEFAULT_FRAME_LIMIT
from ._framing import MAX_FRAME as MAX_FRAME
from ._framing import FrameDecoder as FrameDecoder
from ._framing import ProtocolError as ProtocolError
from ._framing import encode_frame as encode_frame
from ._framing import encode_parts as encode_parts
from ._names import CARRY_MAX_BYTES as CARRY_MAX_BYTES
from ._names import CARRY_MAX_DEFINITIONS as CARRY_MAX_DEFINITIONS
from ._names import CARRY_MAX_NAMES as CARRY_MAX_NAMES
from ._names import DESCRIBE_TOOL as DESCRIBE_TOOL
from ._names import LAYER_NAMES as LAYER_NAMES
from ._names import MAX_PARAMETERS as MAX_PARAMETERS
from ._names import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from ._names import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._names import SEARCH_TOOLS as SEARCH_TOOLS
from ._names import ChildExit as ChildExit
from ._names import Layer as Layer
from ._names import ZygoteError as ZygoteError
from ._names import carry_bytes as carry_bytes
from ._plain import LEAF_TYPES as LEAF_TYPES
from ._plain import MAX_DATA_DEPTH as MAX_DATA_DEPTH
from ._plain import MAX_DATA_NODES as MAX_DATA_NODES
from ._plain import check_plain as check_plain

if typing.TYPE_CHECKING:
    from ._messages import CallFailed as CallFailed
    from ._messages import CallOk as CallOk
    from ._messages import CallTool as CallTool
    from ._messages import CallTools as CallTools
    from ._messages import Carry as Carry
    from ._messages import CarryIn as CarryIn
    from ._messages import ChildMessage as ChildMessage
    from ._messages import Done as Done
    from ._messages import Fetch as Fetch
    from ._messages import FetchResult as FetchResult
    from ._messages import HostMessage as HostMessage
    from ._messages import Output as Output
    from ._messages import PlainData as PlainData
    from ._messages import Ready as Ready
    from ._messages import RunError as RunError
    from ._messages import RunLimits as RunLimits
    from ._messages import SkippedLayer as SkippedLayer
    from ._messages import Start as Start
    from ._messages import ToolCall as ToolCall
    from ._messages import ToolFailed as ToolFailed
    from ._messages import ToolResult as ToolResult
    from ._messages import ToolResults as ToolResults
    from ._messages import parse_child_message as parse_child_message
    from ._messages import parse_host_message as parse_host_message
    from ._zygote_messages import ChildLimits as ChildLimits
    from ._zygote_messages import LayerState as LayerState
    from ._zygote_messages import ZygoteReply as ZygoteReply
    from ._zygote_messages import encode_request as encode_request
    from ._zygote_messages import read_reply as read_reply

__all__ = [
    "CARRY_MAX_BYTES",
    "CARRY_MAX_DEFINITIONS",
    "CARRY_MAX_NAMES",
    "DEFAULT_FRAME_LIMIT",
    "DESCRIBE_TOOL",
    "LAYER_NAMES",
    "LEAF_TYPES",
    "MAX_DATA_DEPTH",
    "MAX_DATA_NODES",
    "MAX_FRAME",
    "MAX_PARAMETERS",
    "MAX_QUERY_CHARS",
    "PROTOCOL_VERSION",
    "SEARCH_TOOLS",
    "CallFailed",
    "CallOk",
    "CallTool",
    "CallTools",
    "Carry",
    "CarryIn",
    "ChildExit",
    "ChildLimits",
    "ChildMessage",
    "Done",
    "Ending",
    "Fetch",
    "FetchResult",
    "FrameDecoder",
    "HostMessage",
    "Layer",
    "LayerState",
    "Output",
    "PlainData",
    "ProtocolError",
    "Ready",
    "RunError",
    "RunLimits",
    "SkippedLayer",
    "Start",
    "ToolCall",
    "ToolFailed",
    "ToolResult",
    "ToolResults",
    "ZygoteError",
    "ZygoteReply",
    "carry_bytes",
    "check_plain",
    "encode_frame",
    "encode_parts",
    "encode_request",
    "parse_child_message",
    "parse_host_message",
    "read_reply",
]

_MODELS: Final = {
    "CallFailed": "_messages",
    "CallOk": "_messages",
    "CallTool": "_messages",
    "CallTools": "_messages",
    "Carry": "_messages",
    "CarryIn": "_messages",
    "ChildMessage": "_messages",
    "Done": "_messages",
    "Fetch": "_messages",
    "FetchResult": "_messages",
    "HostMessage": "_messages",
    "Output": "_messages",
    "PlainData": "_messages",
    "Ready": "_messages",
    "RunError": "_messages",
    "RunLimits": "_messages",
    "SkippedLayer": "_messages",
    "Start": "_messages",
    "ToolCall": "_messages",
    "ToolFailed": "_messages",
    "ToolResult": "_messages",
    "ToolResults": "_messages",
    "parse_child_message": "_messages",
    "parse_host_message": "_messages",
    "ChildLimits": "_zygote_messages",
    "LayerState": "_zygote_messages",
    "ZygoteReply": "_zygote_messages",
    "encode_request": "_zygote_messages",
    "read_reply": "_zygote_messages",
}


def __getattr__(name: str) -> object:
    """The pydantic models and what uses them, imported on first use (the host's: the child,
    which never validates what it sends, never loads them)."""
    module = _MODELS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    """This package's names, the models' among them (before they are first used, too)."""
    return sorted(set(globals()) | set(_MODELS))
