"""The child side of scriptbridge: the code that runs inside the sandbox process.

This package stands alone. It never imports ``scriptbridge`` (the host side); the two share only
the channel's message schema, ``sandbox.protocol``. What the host uses besides the protocol is
re-exported here: the zygote and its client, the OS limits of a child, and the layer probe for
``scriptbridge doctor``.
"""

from ._isolation import OS_LAYERS as OS_LAYERS
from ._isolation import ChildLimits as ChildLimits
from ._isolation import LayerProbe as LayerProbe
from ._isolation import probe_layers as probe_layers
from ._zygote import ChildExit as ChildExit
from ._zygote import SpawnedChild as SpawnedChild
from ._zygote import ZygoteClient as ZygoteClient
from ._zygote import ZygoteError as ZygoteError
from ._zygote import ZygoteProcess as ZygoteProcess

__all__ = [
    "OS_LAYERS",
    "ChildExit",
    "ChildLimits",
    "LayerProbe",
    "SpawnedChild",
    "ZygoteClient",
    "ZygoteError",
    "ZygoteProcess",
    "probe_layers",
]
