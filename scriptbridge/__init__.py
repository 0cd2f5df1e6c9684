"""scriptbridge: run agent-written Python scripts in a fresh, restricted subprocess, and hand
them tool results without leaking what a server asked to keep out of the agent's reach.

The public surface is this list of explicit re-exports (see ``API.md``); every other module
but :mod:`scriptbridge.markers` and :mod:`scriptbridge.lanes` is private.
"""

from sandbox.protocol import Ending as Ending

from ._blocks import SCRIPT_VIEW as SCRIPT_VIEW
from ._claims import Claims as Claims
from ._claims import read_claims as read_claims
from ._classify import Classification as Classification
from ._classify import classify_block as classify_block
from ._exceptions import AddressRefused as AddressRefused
from ._exceptions import FetchError as FetchError
from ._exceptions import IsolationUnavailable as IsolationUnavailable
from ._exceptions import LimitExceeded as LimitExceeded
from ._exceptions import MissingLayer as MissingLayer
from ._exceptions import ProtocolViolation as ProtocolViolation
from ._exceptions import RunCancelled as RunCancelled
from ._exceptions import SandboxCrashed as SandboxCrashed
from ._exceptions import ScriptBridgeError as ScriptBridgeError
from ._exceptions import ScriptFailed as ScriptFailed
from ._exceptions import ScriptRejected as ScriptRejected
from ._exceptions import ToolServerError as ToolServerError
from ._exceptions import WorkspacePathError as WorkspacePathError
from ._fetcher import ReferenceFetcher as ReferenceFetcher
from ._fetcher import ResourceReader as ResourceReader
from ._fetcher import Saved as Saved
from ._fetcher import Unfetchable as Unfetchable
from ._limits import Limits as Limits
from ._mcp import McpServer as McpServer
from ._registry import Journal as Journal
from ._registry import ReferenceRecord as ReferenceRecord
from ._registry import ReferenceRegistry as ReferenceRegistry
from ._render import render_script_view as render_script_view
from ._render import render_withheld_view as render_withheld_view
from ._results import ScriptError as ScriptError
from ._results import ScriptResult as ScriptResult
from ._sessions import BridgeSession as BridgeSession
from ._sessions import SyncBridgeSession as SyncBridgeSession
from ._supervisor import Bridge as Bridge
from ._sync import SyncBridge as SyncBridge
from ._tool_spec import ToolSpec as ToolSpec
from ._tools import PythonTool as PythonTool
from ._tools import python_tool as python_tool
from ._workspace import Workspace as Workspace

__all__ = [
    "SCRIPT_VIEW",
    "AddressRefused",
    "Bridge",
    "BridgeSession",
    "Claims",
    "Classification",
    "Ending",
    "FetchError",
    "IsolationUnavailable",
    "Journal",
    "LimitExceeded",
    "Limits",
    "McpServer",
    "MissingLayer",
    "ProtocolViolation",
    "PythonTool",
    "ReferenceFetcher",
    "ReferenceRecord",
    "ReferenceRegistry",
    "ResourceReader",
    "RunCancelled",
    "SandboxCrashed",
    "Saved",
    "ScriptBridgeError",
    "ScriptError",
    "ScriptFailed",
    "ScriptRejected",
    "ScriptResult",
    "SyncBridge",
    "SyncBridgeSession",
    "ToolServerError",
    "ToolSpec",
    "Unfetchable",
    "Workspace",
    "WorkspacePathError",
    "classify_block",
    "python_tool",
    "read_claims",
    "render_script_view",
    "render_withheld_view",
]
