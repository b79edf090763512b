"""Where the shipped notebooks are, in a source checkout and in an installed package.

A source checkout (``git clone`` plus ``pip install -e .``) runs its own ``notebooks/``, so an edit
there is what ``zeus-nb tour`` executes. An installed wheel carries a copy of the same notebooks
inside the package (``zeus_nb/_notebooks/``, put there by ``setup.py`` at build time), so the
commands work from any working directory without a checkout. ``ZEUS_NB_NOTEBOOKS`` overrides both
(the Docker image points it at the notebooks users edit in ``/workspace``).
"""

from __future__ import annotations

from pathlib import Path

from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.env import env

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the zeus_nb package folder
PACKAGED_NOTEBOOKS = "_notebooks"  # folder name inside the package; setup.py writes it
ENV_VAR = "ZEUS_NB_NOTEBOOKS"


class NotebookNotFoundError(ZeusNbError, FileNotFoundError):
    """No notebook (or notebooks directory) by that name."""


def source_checkout() -> Path | None:
    """The repository root when ``zeus_nb`` is imported from a source checkout, else None.

    A checkout is recognized by ``pyproject.toml`` and ``notebooks/`` beside the package, so an
    unrelated ``notebooks`` folder in ``site-packages`` is never mistaken for one.
    """
    root = PACKAGE_ROOT.parent
    if (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir():
        return root
    return None


def _has_notebooks(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("[0-9][0-9]_*.ipynb"))


def notebooks_dir() -> Path:
    """The folder with the numbered notebooks, whatever the current directory.

    In order: ``$ZEUS_NB_NOTEBOOKS``; the checkout's ``notebooks/``; the packaged copy.
    """
    folder = env(ENV_VAR)
    if folder:
        if not Path(folder).is_dir():
            raise NotebookNotFoundError(
                f"{ENV_VAR}={folder} is not a directory; point it at the folder with the .ipynb "
                "files or unset it to use the notebooks that come with zeus-nb"
            )
        return Path(folder).resolve()
    checkout = source_checkout()
    candidates = ([checkout / "notebooks"] if checkout else []) + [
        PACKAGE_ROOT / PACKAGED_NOTEBOOKS
    ]
    for c in candidates:
        if _has_notebooks(c):
            return c.resolve()
    looked = ", ".join(str(c) for c in candidates)
    raise NotebookNotFoundError(
        f"no notebooks found (looked in {looked}); reinstall zeus-nb from a wheel built by "
        f"`python -m build`, or set {ENV_VAR} to the folder that holds the .ipynb files"
    )
