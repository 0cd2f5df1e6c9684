"""The child side of scriptbridge: the code that runs inside the sandbox process.

This package stands alone. It never imports ``scriptbridge`` (the host side); the two share only
the channel's message schema, ``sandbox.protocol``.
"""
