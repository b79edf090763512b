"""Find the shipped notebooks and execute them headless with papermill.

``zeus-nb sweep`` and ``zeus-nb tour`` share this runner. Each execution:

* runs in a fresh ``python3`` kernel that imports the same ``zeus_nb`` as this process;
* sets ``ZEUS_NB_HEADLESS=1`` (widgets show no controls and the parameter values are used) and
  ``ZEUS_NB_RECORD_FILE`` (the sidecar of :func:`zeus_nb.record`) in the kernel's environment;
* never raises for a failing notebook: the result says what failed, and the partially
  executed output notebook is kept for inspection;
* writes the output notebook (and its records) under a temporary name (``NAME.partial.ipynb``,
  an extension papermill accepts without a warning)
  and moves it into place only when the run returns, stamped with its outcome: an interrupted
  run never replaces a finished one, and a sweep's "done" state is read from that stamp.

The notebooks directory is found by :func:`zeus_nb.runner.paths.notebooks_dir`:
``ZEUS_NB_NOTEBOOKS``, else a source checkout's ``notebooks/``, else the copy packaged in the
wheel.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError, UsageError, ZeusNbError
from zeus_nb.inputs import read_ipynb
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.inputs.registry import environ_read, not_input
from zeus_nb.runner.execute import KERNEL
from zeus_nb.runner.paths import PACKAGE_ROOT, NotebookNotFoundError, notebooks_dir
from zeus_nb.runner.records import sidecar_of
from zeus_nb.utils.environ import temp_environ
from zeus_nb.utils.files import atomic_write, move_into_place


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
    skip_iri_grammar()
    import papermill

    try:
        return papermill.inspect_notebook(str(path))
    except (ValueError, AttributeError, KeyError, TypeError) as e:  # not JSON, not a notebook
        raise ZeusNbError(
            f"{path}: not a readable notebook ({type(e).__name__}: {str(e)[:200]}); "
            "check the path, or open and save it in Jupyter"
        ) from None


# --- parameter grids ----------------------------------------------------------------------------
_CASTS = {"int": int, "float": float, "str": str}


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def declared_type(info: dict[str, Any]) -> str | None:
    """A parameter's type: its annotation (papermill's ``inferred_type_name``), else the type of
    its default value (``smoke = False`` is a bool, so ``-p smoke no`` means False)."""
    t = (info.get("inferred_type_name") or "").strip().lower()
    if t and t != "none":
        return t
    try:
        default = ast.literal_eval(str(info.get("default", "")))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(default))


def parse_value(text: str, type_name: str | None = None, name: str = "") -> Any:
    """One parameter value from text, typed like the notebook declares it (``int``, ``bool``...).

    ``nan`` and ``inf`` are refused for numbers: no notebook parameter means anything with them.
    ``true``/``false`` (also ``yes``/``no``, ``on``/``off``) of an undeclared type are booleans,
    never the truthy text ``"no"``; ``[...]`` is a list whatever the declared type (the
    notebooks' list parameters take one). Errors are :class:`~zeus_nb.errors.InputError`,
    naming the parameter when ``name`` is given.
    """
    t = (type_name or "").strip().lower()
    s = text.strip()
    where = f"parameter {name!r}: " if name else ""
    if t == "bool" or (not t and s.lower() in _TRUE + _FALSE and not s.isdigit()):
        if s.lower() in _TRUE:
            return True
        if s.lower() in _FALSE:
            return False
        raise InputError(f"{where}{text!r} is not a boolean; use true or false")
    if s.startswith("[") and s.endswith("]") and t in ("", "str"):
        t = ""  # a list (the notebooks' list parameters are text or lists): a literal below
    if t in _CASTS:
        try:
            value = _CASTS[t](s)
        except ValueError:
            raise InputError(f"{where}{text!r} is not a valid {t}") from None
    else:
        try:
            value = ast.literal_eval(s)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return s
    if not _finite(value):
        raise InputError(f"{where}{text!r} is not a finite number (or holds one that is not)")
    return value


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (``[1e999]`` is a list holding inf)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if isinstance(v, (list, tuple, set)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, complex):
            return math.isfinite(v.real) and math.isfinite(v.imag)
    return True


def split_values(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes: ``[300,200],[250]`` is two."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


_LIST_HELP = re.compile(r"comma[- ]separated", re.IGNORECASE)


def list_parameter(info: dict[str, Any]) -> bool:
    """Whether one value of the parameter is itself a list: annotated ``list``/``tuple``, a list
    default, or text documented as comma-separated (``live_batch_sizes: str = "32,128"  #
    ... (comma-separated)``), so ``-p live_batch_sizes 32,128`` is one point, not two."""
    t = (info.get("inferred_type_name") or "").strip().lower()
    if t.split("[", 1)[0] in ("list", "tuple"):
        return True
    if str(info.get("default", "")).strip().startswith("["):
        return True
    return t in ("", "str") and bool(_LIST_HELP.search(str(info.get("help") or "")))


def parse_values(
    text: str, type_name: str | None = None, name: str = "", *, listed: bool = False
) -> list[Any]:
    """Comma-separated values (``"64,128,256"``) as a list of typed values; a value in brackets
    is one list (``-p live_power_limits [300,200],[250,150]`` is two points).

    ``listed`` (see :func:`list_parameter`): one value is a list, so text without brackets is
    one point holding all of it (the text as given for a text parameter, else a list).
    """
    s = text.strip()
    if listed and s and not s.startswith("["):
        if (type_name or "").strip().lower() in ("", "str"):
            return [s]
        return [[parse_value(p, None, name) for p in split_values(s)]]
    parts = split_values(text)
    if not parts:
        where = f"parameter {name!r}: " if name else ""
        raise InputError(
            f"{where}no values in {text!r}; give comma-separated values like 64,128,256"
        )
    return [parse_value(p, type_name, name) for p in parts]


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, first parameter varying slowest."""
    for name, values in grid.items():
        if not values:
            raise InputError(f"parameter {name!r} has no values")
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


_SAFE = re.compile(r"[A-Za-z0-9._+-]+")
_MAX_LABEL = 150


def point_name(params: dict[str, Any]) -> str:
    """A file-name-safe label of a grid point: ``batch_size=64,power_limit=150``.

    Readable but lossy (``/tmp/x/a`` and ``/tmp/x_a`` both read ``_tmp_x_a``): a point's files
    are named by :func:`point_file`, which is not.
    """
    if not params:
        return "default"

    def clean(v: Any) -> str:
        return re.sub(r"[^A-Za-z0-9._+-]", "_", str(v))

    return ",".join(f"{clean(k)}={clean(v)}" for k, v in params.items())


def point_identity(notebook: str | Path, params: dict[str, Any]) -> str:
    """What makes a sweep point itself: the notebook and every parameter it runs with (``smoke``
    included), as canonical JSON."""
    return json.dumps(
        {"notebook": Path(notebook).name, "parameters": params}, sort_keys=True, default=repr
    )


def _lossless(params: dict[str, Any]) -> bool:
    """Whether :func:`point_name` can be read back into exactly these parameters."""
    for k, v in params.items():
        text = str(v)
        if not (_SAFE.fullmatch(str(k)) and _SAFE.fullmatch(text)):
            return False
        if not isinstance(v, (bool, int, float, str)) or parse_value(text) != v:
            return False  # e.g. the string "1", which reads back as the int 1
        if type(parse_value(text)) is not type(v):
            return False
    return True


def point_file(notebook: str | Path, point: dict[str, Any], smoke: bool = False) -> str:
    """The file stem of a sweep point's outputs; distinct points never share one.

    It is :func:`point_name` when that label says everything (``batch_size=64``); otherwise a
    digest of :func:`point_identity` follows a ``~`` (a character labels never contain), and a
    smoke run ends in ``~smoke``, so it is never mistaken for (or overwrites) a full run.
    """
    label = point_name(point)
    stem = label
    if not _lossless(point) or len(label) > _MAX_LABEL:
        digest = hashlib.sha256(point_identity(notebook, point).encode()).hexdigest()[:12]
        stem = f"{label[:_MAX_LABEL]}~{digest}"
    return f"{stem}~smoke" if smoke else stem


@not_input("an output notebook zeus-nb wrote; unreadable means not done")
def same_point(output: str | Path, notebook: str | Path, parameters: dict[str, Any]) -> bool:
    """Whether ``output`` is a finished run of ``notebook`` with exactly ``parameters``.

    Resuming a sweep reuses an output only then: a smoke run, another notebook's output or a run
    with other parameters under the same name is run again.
    """
    if not is_complete(output):
        return False
    try:
        pm = read_ipynb(output, "output notebook").metadata.get("papermill", {})
    except (OSError, ZeusNbError):
        return False
    ran = pm.get("parameters") or {}
    same_params = json.dumps(ran, sort_keys=True, default=repr) == json.dumps(
        parameters, sort_keys=True, default=repr
    )
    return same_params and Path(str(pm.get("input_path", ""))).name == Path(notebook).name


#: Options of ``zeus-nb sweep``/``course`` that set a notebook parameter themselves.
PARAMETER_OPTIONS = {"--smoke": "smoke", "--backend": "backend"}


def merge_parameters(given: dict[str, Any], set_by: dict[str, Any]) -> dict[str, Any]:
    """``given`` (``-p`` values) plus the parameters options set (``{"--smoke": True}``).

    A parameter set both ways is a usage error naming both, never silently one of them
    (``--smoke`` once overrode ``-p smoke false``).
    """

    merged = dict(given)
    for option, value in set_by.items():
        name = PARAMETER_OPTIONS[option]
        if name in given:
            raise UsageError(
                f"{option} and -p {name} {given[name]!r} both set the parameter {name}; give one"
            )
        merged[name] = value
    return merged


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


#: Where a run's outcome is stamped in the output notebook's metadata: the "done" state of a
#: sweep point is read from it, never from the file's existence.
OUTCOME_KEY = "zeus_nb"
PARTIAL = ".partial"  # suffix of a run's records while it runs (its notebook: PARTIAL_NOTEBOOK)
# a run's notebook while it runs: NAME.partial.ipynb (papermill warns about other extensions);
# readers of output folders skip such leftovers of a killed run
PARTIAL_NOTEBOOK = ".partial.ipynb"


def partial_of(out: Path) -> Path:
    """Where the run of ``out`` (NAME.ipynb) writes its notebook until it returns."""
    return out.with_name(out.name.removesuffix(".ipynb") + PARTIAL_NOTEBOOK)


@not_input("an output notebook zeus-nb wrote; unreadable means not done")
def is_complete(output: str | Path) -> bool:
    """Whether ``output`` is a notebook whose every cell ran to the end without an error.

    A run writes its notebook under a temporary name and moves it into place only when it
    returns, stamped with its outcome; an interrupted run (Ctrl-C, a killed process) leaves
    the finished notebook before it untouched. Papermill's own metadata is checked too (for
    notebooks written before the stamp): an end time, no exception, no cell left pending.
    """
    try:
        nb = read_ipynb(output, "output notebook")
    except (OSError, ZeusNbError):
        return False
    meta = nb.metadata
    stamp = meta.get(OUTCOME_KEY)
    if isinstance(stamp, dict) and stamp.get("outcome") != "ok":
        return False
    pm = meta.get("papermill", {})
    if not isinstance(pm, dict) or not pm or pm.get("end_time") is None or pm.get("exception"):
        return False
    return all(
        (c.get("metadata", {}).get("papermill") or {}).get("status", "completed") == "completed"
        for c in nb.cells
        if c.get("cell_type") == "code"
    )


@not_input(
    "the output notebook papermill just wrote, stamped with its outcome and moved into place"
)
def _stamp_outcome(partial: Path, out: Path, outcome: str) -> None:
    """Move a finished run's notebook into place, stamped with its outcome ("ok" or why not)."""
    skip_iri_grammar()
    import nbformat

    try:
        nb = read_ipynb(partial, "output notebook")
    except (OSError, ZeusNbError):
        return  # papermill wrote nothing readable: there is no result to keep
    nb.metadata[OUTCOME_KEY] = {"outcome": outcome}
    atomic_write(out, nbformat.writes(nb))
    partial.unlink(missing_ok=True)


@environ_read("PYTHONPATH, passed on to kernels")
def kernel_environment(extra: dict[str, str] | None = None) -> contextlib.AbstractContextManager:
    """Environment papermill kernels inherit, restored afterwards.

    Kernels run headless (controls step aside) and import this process's ``zeus_nb`` first;
    ``extra`` adds variables such as ``ZEUS_NB_RECORD_FILE`` or ``ZEUS_NB_BACKEND``.
    """

    path = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT.parent), os.environ.get("PYTHONPATH", "")) if p
    )
    return temp_environ(ZEUS_NB_HEADLESS="1", PYTHONPATH=path, **(extra or {}))


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
    from zeus_nb.runner.execute import execute

    nb = Path(notebook)
    # Absolute: the kernel runs in ``cwd``, so a relative record path would land below it again.
    out = Path(output).absolute()
    cwd = Path(cwd).absolute() if cwd is not None else None
    out.parent.mkdir(parents=True, exist_ok=True)
    # The run writes under temporary names; the finished result replaces the old one only when
    # the run returns, so Ctrl-C (or --force, then Ctrl-C) never loses a finished point.
    partial = partial_of(out)
    side = sidecar_of(out)
    partial_side = side.with_name(side.name + PARTIAL)
    partial.unlink(missing_ok=True)
    partial_side.unlink(missing_ok=True)
    params = dict(parameters or {})
    start = time.monotonic()
    with kernel_environment({"ZEUS_NB_RECORD_FILE": str(partial_side)}):
        outcome = execute(nb, partial, params, cwd, kernel_name, timeout, progress)
    Path(f"{partial_side}.lock").unlink(missing_ok=True)  # zeus_nb.record's, now unused
    if partial_side.exists():
        move_into_place(partial_side, side)
    else:
        side.unlink(missing_ok=True)  # this run recorded nothing beside its notebook
    _stamp_outcome(partial, out, "ok" if outcome.ok else outcome.error or "failed")
    return RunResult(nb, out, params, outcome.ok, time.monotonic() - start, outcome.error)
