"""Build step that puts the notebooks into the wheel; everything else is in pyproject.toml.

The notebooks stay at the repository root (``notebooks/*.ipynb``, edited through their jupytext
sources in ``notebooks/src/``). Building a wheel copies them into the package as
``zeus_nb/_notebooks/``, which :func:`zeus_nb.runner.paths.notebooks_dir` finds in an installed
package. Editable installs copy nothing: a checkout runs its own ``notebooks/``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
TARGET = Path("zeus_nb") / "_notebooks"


class build_py_with_notebooks(build_py):  # noqa: N801 (setuptools command naming)
    """``build_py`` plus a copy of ``notebooks/NN_*.ipynb`` into ``zeus_nb/_notebooks/``."""

    def _notebooks(self) -> list[Path]:
        return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        notebooks = self._notebooks()
        if not notebooks:
            raise SystemExit(f"no notebooks in {NOTEBOOKS}: the wheel would ship none")
        target = Path(self.build_lib) / TARGET
        self.mkpath(str(target))
        for nb in notebooks:
            self.copy_file(str(nb), str(target / nb.name))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [str(Path(self.build_lib) / TARGET / nb.name) for nb in self._notebooks()]


setup(cmdclass={"build_py": build_py_with_notebooks})
