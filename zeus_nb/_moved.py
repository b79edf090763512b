"""Old import paths of modules that moved into their packages, kept working in one table.

Notebooks handed out to students, scripts and docs of earlier releases import modules by the
paths they had then (``zeus_nb.check``, ``zeus_nb.sweep``, ``zeus_nb.util.env``...). Rather than
a shim file per old path, one import hook maps each old name to the module's new home and hands
back *the same module object*: ``zeus_nb.check is zeus_nb.course.check``, so monkeypatching and
module state behave exactly as before. Submodules of a moved package follow it
(``zeus_nb.util.env`` -> ``zeus_nb.utils.env``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

# old module path -> where the module lives now
MOVED: dict[str, str] = {
    "zeus_nb._diskcache": "zeus_nb.utils.diskcache",
    "zeus_nb._env": "zeus_nb.utils.environ",
    "zeus_nb.carbon": "zeus_nb.monitor",
    "zeus_nb.carbon_http": "zeus_nb.monitor",
    "zeus_nb.check": "zeus_nb.course.check",
    "zeus_nb.cluster": "zeus_nb.runner.cluster",
    "zeus_nb.cluster_workers": "zeus_nb.runner.workers",
    "zeus_nb.demos": "zeus_nb.train.demos",
    "zeus_nb.device.nvml": "zeus_nb.device.gpu.nvidia",
    "zeus_nb.doctor": "zeus_nb.device.doctor",
    "zeus_nb.execute": "zeus_nb.runner.execute",
    "zeus_nb.exercises": "zeus_nb.course.exercises",
    "zeus_nb.extras": "zeus_nb.utils.extras",
    "zeus_nb.logs": "zeus_nb.utils.logging",
    "zeus_nb.monitor_cli": "zeus_nb.monitor.cli",
    "zeus_nb.nbsetup": "zeus_nb.runner.setup",
    "zeus_nb.notebooks": "zeus_nb.runner.notebooks",
    "zeus_nb.optimizer.batch_size_sim": "zeus_nb.optimizer.batch_size.simulator",
    "zeus_nb.optimizer.batch_size_store": "zeus_nb.optimizer.batch_size.store",
    "zeus_nb.optimizer.restore": "zeus_nb.device.guard",
    "zeus_nb.paths": "zeus_nb.runner.paths",
    "zeus_nb.power_monitor": "zeus_nb.monitor.power",
    "zeus_nb.records": "zeus_nb.runner.records",
    "zeus_nb.sweep": "zeus_nb.runner.sweep",
    "zeus_nb.sweep_points": "zeus_nb.runner.points",
    "zeus_nb.temperature": "zeus_nb.monitor.temperature",
    "zeus_nb.torch_train": "zeus_nb.train.sweep_fn",
    "zeus_nb.traces": "zeus_nb.data.traces",
    "zeus_nb.train.pipeline_clock": "zeus_nb.train.pipeline.clock",
    "zeus_nb.train.pipeline_cost": "zeus_nb.train.pipeline.cost",
    "zeus_nb.train.pipeline_launch": "zeus_nb.train.pipeline.launch",
    "zeus_nb.train.pipeline_layout": "zeus_nb.train.pipeline.layout",
    "zeus_nb.train.pipeline_models": "zeus_nb.train.pipeline.models",
    "zeus_nb.train.pipeline_plan": "zeus_nb.train.pipeline.plan",
    "zeus_nb.train.pipeline_profile": "zeus_nb.train.pipeline.profile",
    "zeus_nb.train.pipeline_profiling": "zeus_nb.train.pipeline.profiling",
    "zeus_nb.train.pipeline_stages": "zeus_nb.train.pipeline.stages",
    "zeus_nb.util": "zeus_nb.utils",
    "zeus_nb.validate": "zeus_nb.utils.validate",
}


def new_name(old: str) -> str | None:
    """Where the module once imported as ``old`` lives now (None: it never moved)."""
    if old in MOVED:
        return MOVED[old]
    head, _, tail = old.rpartition(".")
    while head:
        if head in MOVED:
            return f"{MOVED[head]}.{old[len(head) + 1 :]}"
        head, _, tail = head.rpartition(".")
    return None


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds old module paths and loads them as the module at the new path."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002
        if not fullname.startswith("zeus_nb.") or new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        target = importlib.import_module(new_name(spec.name))
        spec.loader_state = target.__spec__  # the import system overwrites __spec__; put it back
        return target

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per interpreter)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
