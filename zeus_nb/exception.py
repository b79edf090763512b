"""Zeus's base exception, which in zeus-nb is :class:`zeus_nb.errors.ZeusNbError` itself.

An alias rather than a separate base class: Zeus code that catches ``ZeusBaseError`` then also
catches zeus-nb's own errors (an unusable input, a trace file in the wrong format), and every
Zeus-named error (``ZeusGPUNoPermissionError``...) is a ``ZeusNbError`` that the CLI prints as
one line. Its constructor takes the message first, and ``.message`` returns it, as in Zeus.
"""

from __future__ import annotations

from zeus_nb.errors import ZeusNbError as ZeusBaseError

__all__ = ["ZeusBaseError"]
