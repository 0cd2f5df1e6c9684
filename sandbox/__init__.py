"""The child side of scriptbridge: the code that runs inside the sandbox process.

This package stands alone. It never imports ``scriptbridge`` (the host side). The host enters it
by one door: this module and :mod:`sandbox.protocol` (the sans-I/O schema both sides share).
Re-exported here is what the host uses besides the protocol: the launcher of the zygote and its
client, the OS limits of a child, frame I/O on raw fds, and the layer probe for
``scriptbridge doctor``.

The launcher (:mod:`sandbox._launcher`) runs in the host only. Its names, and the protocol's
models (``ChildLimits``), are loaded on first use, so the fork server and its children, which
import this package too, load neither (nor pydantic).
"""

import typing

from ._blocking_channel import BlockingChannel as BlockingChannel
from ._blocking_channel import write_parts as write_parts
from ._isolation import OS_LAYERS as OS_LAYERS
from ._isolation import LayerProbe as LayerProbe
from ._isolation import probe_layers as probe_layers
from .protocol import ChildExit as ChildExit
from .protocol import ZygoteError as ZygoteError

if typing.TYPE_CHECKING:
    from ._guards import SCRIPT_IMPORTS as SCRIPT_IMPORTS
    from ._launcher import TO_CHILD_SEND_BUFFER as TO_CHILD_SEND_BUFFER
    from ._launcher import SpawnedChild as SpawnedChild
    from ._launcher import ZygoteClient as ZygoteClient
    from ._launcher import ZygoteProcess as ZygoteProcess
    from ._launcher import open_channel as open_channel
    from .protocol import ChildLimits as ChildLimits

__all__ = [
    "OS_LAYERS",
    "SCRIPT_IMPORTS",
    "TO_CHILD_SEND_BUFFER",
    "BlockingChannel",
    "ChildExit",
    "ChildLimits",
    "LayerProbe",
    "SpawnedChild",
    "ZygoteClient",
    "ZygoteError",
    "ZygoteProcess",
    "open_channel",
    "probe_layers",
    "write_parts",
]

_LAUNCHER_NAMES = frozenset(
    {"TO_CHILD_SEND_BUFFER", "SpawnedChild", "ZygoteClient", "ZygoteProcess", "open_channel"}
)


def __getattr__(name: str) -> object:
    """The launcher's names, imported from :mod:`sandbox._launcher` on first use,
    ``ChildLimits`` (a model of the protocol's, loaded on first use too) and
    ``SCRIPT_IMPORTS`` (the modules a script may import)."""
    if name in _LAUNCHER_NAMES:
        from . import _launcher

        return getattr(_launcher, name)
    if name == "ChildLimits":
        from . import protocol

        return protocol.ChildLimits
    if name == "SCRIPT_IMPORTS":  # the language layer's, loaded only when asked for
        from . import _guards

        return _guards.SCRIPT_IMPORTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """This module's names, the launcher's and ``ChildLimits`` among them (before they are
    first used, too)."""
    return sorted(set(globals()) | _LAUNCHER_NAMES | {"ChildLimits", "SCRIPT_IMPORTS"})
