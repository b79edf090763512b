"""A warning for monitors built while a spawned child re-imports the main script.

With the ``spawn`` start method a child process runs the parent's main script again as
``__mp_main__``; a monitor (or a model) built at module level is then built once more in every
child. Monitors call :func:`warn_if_global_in_subprocess` so the user hears about it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any


def _building_at_import_of_mp_main() -> bool:
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
    if _building_at_import_of_mp_main():
        warnings.warn(
            f"{type(self).__name__} was created while a spawned subprocess re-imported your main "
            "script, so it is created again in every child; create it under "
            '`if __name__ == "__main__":` or inside a function',
            stacklevel=3,
        )
