"""Find the shipped notebooks and execute them headless with papermill.

``zeus-nb sweep`` and ``zeus-nb tour`` share this runner. Each execution:

* runs in a fresh ``python3`` kernel that imports the same ``zeus_nb`` as this process;
* sets ``ZEUS_NB_HEADLESS=1`` (widgets show no controls and the parameter values are used) and
  ``ZEUS_NB_RECORD_FILE`` (the sidecar of :func:`zeus_nb.record`) in the kernel's environment;
* never raises for a failing notebook: the result says what failed, and papermill keeps the
  partially executed output notebook for inspection.

The notebooks directory is found by :func:`zeus_nb.paths.notebooks_dir`: ``ZEUS_NB_NOTEBOOKS``,
else a source checkout's ``notebooks/``, else the copy packaged in the wheel.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.paths import NotebookNotFoundError, notebooks_dir

PACKAGE_ROOT = Path(__file__).resolve().parent
KERNEL = "python3"


def list_notebooks(directory: Path | None = None) -> list[Path]:
    """The numbered notebooks (``NN_name.ipynb``) in order."""
    d = directory or notebooks_dir()
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


def find_notebook(name: str | Path) -> Path:
    """A notebook by path, or by number or name among the shipped ones (``01``, ``tradeoff``)."""
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p.resolve()
    if p.suffix == ".ipynb" or p.parent != Path("."):
        raise NotebookNotFoundError(f"notebook {str(name)!r} does not exist")
    shipped = list_notebooks()
    key = str(name).lower()
    matches = [n for n in shipped if n.stem == key or n.stem.startswith(key + "_")] or [
        n for n in shipped if key in n.stem
    ]
    if len(matches) == 1:
        return matches[0]
    names = ", ".join(n.stem for n in shipped) or "none"
    what = "is ambiguous" if matches else "matches no notebook"
    raise NotebookNotFoundError(f"{str(name)!r} {what}; shipped notebooks: {names}")


def notebook_parameters(path: str | Path) -> dict[str, dict[str, Any]]:
    """The ``parameters`` cell's names -> {inferred_type_name, default, help}."""
    import papermill

    return papermill.inspect_notebook(str(path))


# --- parameter grids ----------------------------------------------------------------------------
_CASTS = {"int": int, "float": float, "str": str}


def parse_value(text: str, type_name: str | None = None) -> Any:
    """One parameter value from text, typed like the notebook declares it (``int``, ``bool``...)."""
    t = (type_name or "").strip().lower()
    s = text.strip()
    if t == "bool":
        if s.lower() in ("true", "1", "yes"):
            return True
        if s.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{text!r} is not a boolean; use true or false")
    if t in _CASTS:
        try:
            return _CASTS[t](s)
        except ValueError:
            raise ValueError(f"{text!r} is not a valid {t}") from None
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s


def parse_values(text: str, type_name: str | None = None) -> list[Any]:
    """Comma-separated values (``"64,128,256"``) as a list of typed values."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"no values in {text!r}; give comma-separated values like 64,128,256")
    return [parse_value(p, type_name) for p in parts]


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, first parameter varying slowest."""
    for name, values in grid.items():
        if not values:
            raise ValueError(f"parameter {name!r} has no values")
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def point_name(params: dict[str, Any]) -> str:
    """A file-name-safe label of a grid point: ``batch_size=64,power_limit=150``."""
    if not params:
        return "default"

    def clean(v: Any) -> str:
        return re.sub(r"[^A-Za-z0-9._+-]", "_", str(v))

    return ",".join(f"{clean(k)}={clean(v)}" for k, v in params.items())


# --- execution ----------------------------------------------------------------------------------
@dataclass
class RunResult:
    """Outcome of one notebook execution."""

    notebook: Path
    output: Path
    parameters: dict[str, Any]
    ok: bool
    seconds: float
    error: str = ""
    skipped: bool = False


def is_complete(output: str | Path) -> bool:
    """Whether ``output`` is a notebook papermill finished executing without an error."""
    import nbformat

    p = Path(output)
    if not p.exists():
        return False
    try:
        nb = nbformat.read(p, as_version=4)
    except Exception:
        return False
    pm = nb.metadata.get("papermill", {})
    return bool(pm) and pm.get("end_time") is not None and not pm.get("exception")


@contextlib.contextmanager
def kernel_environment(extra: dict[str, str] | None = None) -> Iterator[None]:
    """Environment papermill kernels inherit, restored afterwards.

    Kernels run headless (controls step aside) and import this process's ``zeus_nb`` first;
    ``extra`` adds variables such as ``ZEUS_NB_RECORD_FILE`` or ``ZEUS_NB_BACKEND``.
    """
    changes = {
        "ZEUS_NB_HEADLESS": "1",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(PACKAGE_ROOT.parent), os.environ.get("PYTHONPATH", "")) if p
        ),
        **(extra or {}),
    }
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_notebook(
    notebook: str | Path,
    output: str | Path,
    parameters: dict[str, Any] | None = None,
    cwd: str | Path | None = None,
    kernel_name: str = KERNEL,
    timeout: float | None = None,
    progress: bool = False,
) -> RunResult:
    """Execute ``notebook`` into ``output`` with papermill; never raises for a failing cell.

    ``cwd`` defaults to the output's directory; ``timeout`` is per cell, in seconds.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from zeus_nb.records import sidecar_of

    nb = Path(notebook)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    side = sidecar_of(out)
    side.unlink(missing_ok=True)
    params = dict(parameters or {})
    start = time.monotonic()
    error = ""
    with kernel_environment({"ZEUS_NB_RECORD_FILE": str(side)}):
        try:
            papermill.execute_notebook(
                str(nb),
                str(out),
                parameters=params,
                kernel_name=kernel_name,
                cwd=str(cwd or out.parent),
                progress_bar=progress,
                execution_timeout=timeout,
            )
        except PapermillExecutionError as e:
            error = f"{e.ename}: {e.evalue} (cell {e.exec_count})"
        except Exception as e:  # kernel died, timeout, bad notebook: report and go on
            error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e) else ''}"
    return RunResult(nb, out, params, not error, time.monotonic() - start, error)
