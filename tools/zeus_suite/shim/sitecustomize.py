"""Make ``import zeus.x.y`` give the module object ``zeus_nb.x.y`` in this interpreter.

``tools/zeus_suite/run.py`` puts this folder first on ``PYTHONPATH`` when it runs Zeus's own unit
tests, so the alias exists before pytest starts and in every child process (spawned workers
inherit ``PYTHONPATH``). Nothing is copied or wrapped: ``sys.modules["zeus.x"]`` *is*
``sys.modules["zeus_nb.x"]``, so ``mocker.patch("zeus.device.gpu.nvidia.pynvml")`` patches the very
attribute zeus-nb's code reads. A name zeus-nb lacks fails as Python's own ModuleNotFoundError.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

_ALIAS, _REAL = "zeus", "zeus_nb"


class _SameModule(importlib.abc.Loader):
    """Hands back the already imported real module instead of executing anything."""

    def __init__(self, real: str) -> None:
        self.real = real
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec):
        module = importlib.import_module(self.real)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # The import system stamped the alias's spec on the shared module object; give it back
        # its own, so that zeus_nb's relative imports and reloads still resolve.
        if self.real_spec is not None:
            module.__spec__ = self.real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != _ALIAS and not fullname.startswith(_ALIAS + "."):
            return None
        real = _REAL + fullname[len(_ALIAS) :]
        try:
            real_spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if real_spec is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, _SameModule(real), is_package=real_spec.submodule_search_locations is not None
        )


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
