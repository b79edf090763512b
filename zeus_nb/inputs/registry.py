"""Which functions read outside input, and through which schema.

A reader declares itself with :func:`reader`; ``tests/test_reliability_battery.py`` scans the
package for functions that open, read or connect to anything and fails for one that is neither
a declared reader nor listed in :data:`NOT_INPUT` (files zeus-nb itself wrote and owns, kernel
counters, package data), and feeds every declared reader the battery of bad files. So a new
reader cannot skip the boundary unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from zeus_nb.inputs.schema import Schema

F = TypeVar("F", bound=Callable)

#: ``module.qualname`` of each declared reader -> the schemas it reads through.
READERS: dict[str, tuple[Schema, ...]] = {}


def reader(*schemas: Schema) -> Callable[[F], F]:
    """Mark a function as a reader of outside input through ``schemas`` (no runtime cost)."""

    def mark(fn: F) -> F:
        READERS[f"{fn.__module__}.{fn.__qualname__}"] = schemas
        fn.__input_schemas__ = schemas  # type: ignore[attr-defined]
        return fn

    return mark


#: Functions that read something that is not outside input, and why.
NOT_INPUT: dict[str, str] = {
    "zeus_nb.cli.main": "argv only; files are read by the commands' readers",
    "zeus_nb.commands.notebooks._read_record": "the copy record zeus-nb writes itself; "
    "unreadable means 'no record' (every copy is then kept as edited)",
    "zeus_nb.commands.notebooks.copy_notebooks": "compares the user's copy byte for byte",
    "zeus_nb.commands.sweep.write_results": "results.csv zeus-nb wrote; unreadable is kept "
    "aside as results.csv.damaged, never parsed into numbers",
    "zeus_nb.device.cpu._read_name": "Linux powercap sysfs (kernel), not user input",
    "zeus_nb.device.cpu.RaplZone.__init__": "Linux powercap sysfs (kernel), not user input",
    "zeus_nb.device.cpu.RaplZone._raw": "Linux powercap sysfs counter, checked by the caller",
    "zeus_nb.device.nvml.has_sys_admin": "/proc/self/status (kernel)",
    "zeus_nb.docsite._title": "the project's own guides (docs build from a checkout)",
    "zeus_nb.docsite.assemble": "the project's own guides (docs build from a checkout)",
    "zeus_nb.runner.execute._tail": "the last lines of a kernel's own log, shown as text",
    "zeus_nb.runner.execute.execute": "papermill's output notebook, read by nbformat",
    "zeus_nb.runner.points.execute_notebook_task": "bytes of a notebook shipped to a worker",
    "zeus_nb.runner.points.sweep_notebook_on_cluster": "bytes of a notebook shipped to workers",
    "zeus_nb.utils.diskcache.cached": "zeus-nb's own cache; unreadable means recompute",
    "zeus_nb.utils.files.append_line": "the write path (reads back the file's last byte)",
    "zeus_nb.utils.files.end_with_newline": "the write path (reads back the file's last byte)",
}
