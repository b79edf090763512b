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
    "zeus_nb.commands.notebooks._read_record": "the copy record zeus-nb writes itself; "
    "unreadable means 'no record' (every copy is then kept as edited)",
    "zeus_nb.commands.notebooks.copy_notebooks": "compares the user's copy byte for byte",
    "zeus_nb.commands.sweep.write_results": "results.csv zeus-nb wrote; an unreadable one is "
    "kept aside as results.csv.damaged, never parsed into numbers",
    "zeus_nb.course.grade._grade_one": "a submitted notebook, read by nbformat; unreadable is "
    "that submission's grade",
    "zeus_nb.course.grade_report.read_ledger": "grades.json, which course grade wrote into "
    "its output folder; a row it did not write is refused with a CourseError naming the file",
    "zeus_nb.course.markers.build": "the shipped notebooks (or the user's), read by nbformat",
    "zeus_nb.course.markers.edition_text": "a notebook, read by nbformat",
    "zeus_nb.course.slides.build_slides": "a notebook, read by nbformat",
    "zeus_nb.course.timings._duration": "an executed notebook; its run time is checked there",
    "zeus_nb.course.timings._papermill_metadata": "an executed notebook, read by nbformat",
    "zeus_nb.course.slides.executed_copy": "a notebook, read by nbformat",
    "zeus_nb.optimizer.pipeline_frequency.profile.read_sidecar": "the metadata JSON zeus-nb "
    "writes beside a profile: text lines only, anything else is refused there",
    "zeus_nb.train.pipeline.profile.uncomment": "an older profile being resumed, which "
    "existing_keys read through INSTRUCTION_PROFILE first; only its # lines move",
    "zeus_nb.optimizer.pipeline_frequency.common._load": "a JSON list that save_prof, "
    "save_sched or save_ranks wrote; each item is checked by its record class (parse_obj)",
    "zeus_nb.optimizer.pipeline_frequency.schedule_file.load_schedules": "Zeus's schedule file; "
    "each entry is checked there (an instruction name and an integer clock of 1 to 10000 MHz)",
    "zeus_nb.utils.testing.ReplayZeusMonitor._read": "Zeus's own power log format; each value "
    "is checked there (finite, in range) and a bad line is named",
    "zeus_nb.docsite._title": "the project's own guides (docs build from a checkout)",
    "zeus_nb.docsite.assemble": "the project's own guides (docs build from a checkout)",
    "zeus_nb.docsite.clean_executed": "a notebook execute_notebooks just wrote",
    "zeus_nb.docsite.copy_executed": "executed notebooks, compared cell by cell with today's "
    "student edition; anything else is refused",
    "zeus_nb.docsite.facts.simulated_gpus": "the project's own notebook sources (a checkout)",
    "zeus_nb.docsite.facts.sync": "the project's own README and guides (a checkout)",
    "zeus_nb.course.verify.judge_executed": "an executed notebook, read by nbformat",
    "zeus_nb.optimizer.pipeline_frequency.profile.parse_profile": "parses lines a caller "
    "read; load_profile reads files through the same schema",
    "zeus_nb.optimizer.power_limit.profile_file.is_zeus_profile": "a probe: any error means "
    "'not Zeus's format', and load_profile then reads the file through its schema",
    "zeus_nb.optimizer.power_limit.profile_file.upgrade_zeus_profile": "copies Zeus's file, "
    "which load_profile read and checked, beside it byte for byte",
    "zeus_nb.runner.notebooks.is_complete": "an output notebook zeus-nb wrote; unreadable "
    "means not done",
    "zeus_nb.runner.notebooks.same_point": "an output notebook zeus-nb wrote; unreadable "
    "means not done",
    "zeus_nb.runner.points.sweep_notebook_on_cluster": "bytes of a notebook shipped to workers",
    "zeus_nb.runner.records._read_ipynb": "a notebook, read by nbformat; unreadable is a "
    "ZeusNbError naming it (records.collect reports it and reads the others)",
    "zeus_nb.train.launch.run_for_results": "the results JSON of the training it just ran",
    "zeus_nb.utils.diskcache.cached": "zeus-nb's own cache; unreadable means recompute",
    "zeus_nb.runner.notebooks._stamp_outcome": "the output notebook papermill just wrote, "
    "stamped with its outcome and moved into place",
    "zeus_nb.utils.testing.ReplayZeusMonitor._next_row": "the next row of the same log, read "
    "as windows end; each value is checked by end_window (finite, in range)",
    "zeus_nb.optimizer.batch_size.server.database.db_connection.DatabaseSessionManager."
    "__init__": "the batch-size optimizer server's own database (a zeus-nb store); every row "
    "server.jobs reads is checked there through JOB_SPEC and STORED_RUN, as the stores do",
}


#: Functions that open files themselves rather than through :func:`~zeus_nb.inputs.read_bytes`
#: and friends, and why: kernel files, package data, the project's own checkout, files in a
#: private temporary folder this process made, a database server. Any other function that
#: opens a file must check it with :func:`~zeus_nb.inputs.regular_file` first (a FIFO would
#: block it, ``/dev/zero`` never end); tests/test_reliability_discovery.py fails for one
#: that does neither.
SYSTEM_READS: dict[str, str] = {
    "zeus_nb.device.cpu.rapl._read_uj": "a powercap sysfs counter (kernel), not user input",
    "zeus_nb.device.cpu.rapl._read_zone_file": "Linux powercap sysfs (kernel), not user input",
    "zeus_nb.device.cpu.rapl.RAPLFile._open_counter": "a powercap sysfs counter (kernel)",
    "zeus_nb.device.cpu.get_current_cpu_index": "/proc/self/stat (kernel)",
    "zeus_nb.device.common.has_sys_admin": "/proc/self/status (kernel)",
    "zeus_nb.device.sim_wall._waited": "/proc/self/schedstat (kernel)",
    "zeus_nb.course.reveal._member": "a file of the reveal.js or require.js package that npm "
    "fetched, copied byte for byte",
    "zeus_nb.course.reveal.vendor": "its own stamp of the vendored package versions",
    "zeus_nb.course.runtimes.load": "package data: the run-time table the tour benchmark wrote",
    "zeus_nb.course.runtimes.sync": "the project's own README and guides (a checkout)",
    "zeus_nb.optimizer.batch_size.server.database.db_connection.DatabaseSessionManager."
    "__init__": "the server's database, reached by URL (Zeus's settings name it, as a database "
    "server's or an SQLite file's); a session that cannot open it fails with our error",
    "zeus_nb.optimizer.batch_size.sql_store.SQLStore.__init__": "a database server reached by "
    "URL, not a file (open_store sends SQLite paths to SQLiteStore, which checks them)",
    "zeus_nb.course.slides._stylesheet": "the JupyterLab theme installed with nbconvert",
    "zeus_nb.docsite._title": "the project's own guides (docs build from a checkout)",
    "zeus_nb.docsite.assemble": "the project's own guides (docs build from a checkout)",
    "zeus_nb.docsite.facts.simulated_gpus": "the project's own notebook sources (a checkout)",
    "zeus_nb.docsite.facts.sync": "the project's own README and guides (a checkout)",
    "zeus_nb.runner.execute._tail": "the last lines of a kernel's own log, shown as text",
    "zeus_nb.runner.points.execute_notebook_task": "bytes of a notebook shipped to a worker",
}


#: Functions that read ``os.environ`` themselves, and why (every other variable is declared in
#: :mod:`zeus_nb.inputs.env` and read through :func:`~zeus_nb.inputs.env.env`).
ENV_NOT_INPUT: dict[str, str] = {
    "zeus_nb.device.guard.SettingsGuard._write_state": "CUDA_VISIBLE_DEVICES recorded as is",
    "zeus_nb.device.settings.state_dir": "XDG_CACHE_HOME, a standard folder variable",
    "zeus_nb.optimizer.pipeline_frequency.common._env_json": "Zeus's ZEUS_PFO_<FIELD> settings "
    "(any field of PFOServerSettings), JSON parsed there",
    "zeus_nb.show_env._devices": "CUDA_VISIBLE_DEVICES, shown as it is",
    "zeus_nb.utils.threads.from_environment": "OMP_NUM_THREADS, torch's and BLAS's own variable, "
    "checked there, and zeus-nb's mark of its own default",
    "zeus_nb.optimizer.batch_size.store.default_path": "LOCALAPPDATA and XDG_CACHE_HOME",
    "zeus_nb.utils.diskcache.cache_dir": "XDG_CACHE_HOME, a standard folder variable",
    "zeus_nb.device.gpu.nvidia.visible_nvml_indices": "CUDA_VISIBLE_DEVICES, parsed there",
    "zeus_nb.device.gpu.amd.visible_hip_indices": "HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, "
    "parsed there",
    "zeus_nb.docsite._environ": "saves variables to restore them afterwards",
    "zeus_nb.runner.records._default_sidecar": "JPY_SESSION_NAME (Jupyter's), a file name",
    "zeus_nb.runner.notebooks.kernel_environment": "PYTHONPATH, passed on to kernels",
    "zeus_nb.runner.points.execute_notebook_task": "CUDA_VISIBLE_DEVICES of the worker",
    "zeus_nb.runner.workers._visible_gpus": "CUDA_VISIBLE_DEVICES, parsed there",
    "zeus_nb.runner.workers.PinGPU.setup": "CUDA_VISIBLE_DEVICES of the worker",
    "zeus_nb.train.distributed.setup": "torchrun's RANK and WORLD_SIZE, present or not",
    "zeus_nb.train.pipeline.trainer.run": "saves ZEUS_NB_BACKEND to restore it afterwards",
    "zeus_nb.utils.environ.temp_environ": "saves variables to restore them afterwards",
    "zeus_nb.utils.env.get_env": "Zeus's get_env API: any variable a caller names",
    "zeus_nb.utils.boundary.debug_requested": "ZEUS_NB_DEBUG, read before any other input",
}
