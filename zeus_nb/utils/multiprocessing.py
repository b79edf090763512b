"""A warning for monitors built while a spawned child re-imports the main script.

With the ``spawn`` start method a child process runs the parent's main script again as
``__mp_main__``; a monitor (or a model) built at module level is then built once more in every
child. Monitors call :func:`warn_if_global_in_subprocess` so the user hears about it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any


def _is_global_in_spawned_child() -> bool:
    """Whether module-level code of a spawned child's re-imported main script is running.

    Frames of multiprocessing's own bootstrap (``<string>``, ``<frozen ...>``) do not count.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            name = frame.f_code.co_filename
            if not (name == "<string>" or name.startswith("<frozen")):
                return True
        frame = frame.f_back
    return False


def warn_if_global_in_subprocess(self: Any) -> None:
    """Warn when ``self`` is being built by module-level code of a spawned child's main script."""
    if _is_global_in_spawned_child():
        warnings.warn(
            f"{type(self).__name__} was instantiated during module import in a spawned "
            "subprocess: the child re-ran your main script's global code, so it is built again "
            'in every child. Build it under `if __name__ == "__main__":` or inside a function.',
            stacklevel=3,
        )
