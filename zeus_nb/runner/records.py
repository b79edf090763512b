"""Record a notebook's key results, then gather them from many executed notebooks.

``record(name, value)`` does two things so results survive however the notebook was run:

* it displays the value with the MIME type :data:`MIMETYPE`; papermill and JupyterLab keep that
  output in the saved notebook, so the executed ``.ipynb`` is the record;
* it writes the value into a sidecar JSON file when one is configured: ``ZEUS_NB_RECORD_FILE``
  (set by ``zeus-nb sweep`` and ``zeus-nb tour`` to ``<output>.records.json``), or
  ``ZEUS_NB_RECORD_DIR`` (``<dir>/<notebook>.records.json``), or :func:`configure`.

``collect(paths)`` reads executed notebooks (and sidecars) into one pandas DataFrame, one row per
notebook, with the papermill parameters next to the recorded values, ready for a sweep analysis.

This module lives at ``zeus_nb.runner.records`` (plural) so that ``zeus_nb.record`` always names the
function, never a module.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zeus_nb import inputs
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs import check_record, read_json, reader
from zeus_nb.inputs.env import env
from zeus_nb.inputs.kinds import RECORDS_SIDECAR
from zeus_nb.inputs.registry import environ_read, not_input
from zeus_nb.utils.files import atomic_write

log = logging.getLogger(__name__)

MIMETYPE = "application/vnd.zeus-nb.record+json"
SIDECAR_SUFFIX = ".records.json"
ENV_FILE = "ZEUS_NB_RECORD_FILE"
ENV_DIR = "ZEUS_NB_RECORD_DIR"

_records: dict[str, Any] = {}
_sidecar: Path | None = None
_gpu_sources: dict[str, str] = {}  # record name -> the GPU that produced it
_gpu_source: str | None = None  # the notebook's GPU: what a record names by default


def set_gpu_source(source: str | None) -> None:
    """Name the GPU the notebook measures (``real: <name>``, ``simulated: <name>``): records
    made without ``gpu=`` say they came from it. :func:`zeus_nb.notebook_setup` calls this."""
    global _gpu_source
    _gpu_source = source


def _plain(value: Any, where: str) -> Any:
    """``value`` as plain JSON types (numpy and pandas values, dataclasses and paths included)."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None if math.isnan(value) else str(value)
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value), where)
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # pandas DataFrame
        return _plain(value.to_dict(orient="records"), where)
    if hasattr(value, "to_dict"):  # pandas Series
        return _plain(value.to_dict(), where)
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _plain(value.tolist(), where)
    raise TypeError(
        f"cannot record {where}: {type(value).__name__} is not JSON-serialisable; record numbers, "
        "strings, lists or dicts of them (e.g. float(x), df.to_dict())"
    )


@environ_read("JPY_SESSION_NAME (Jupyter's), a file name")
def _default_sidecar() -> Path | None:
    if _sidecar is not None:
        return _sidecar
    file = env(ENV_FILE)
    if file:
        return Path(file)
    directory = env(ENV_DIR)
    if directory:
        session = os.environ.get("JPY_SESSION_NAME") or "notebook"
        return Path(directory) / (Path(session).stem + SIDECAR_SUFFIX)
    return None


def configure(file: str | Path | None = None, directory: str | Path | None = None) -> Path | None:
    """Choose where the sidecar goes (``file``, or ``<directory>/records.json``); returns it.

    With neither, go back to the environment (``ZEUS_NB_RECORD_FILE`` / ``ZEUS_NB_RECORD_DIR``).
    """
    global _sidecar
    if file is not None and directory is not None:
        raise InputError("give either file or directory, not both")
    if file is not None:
        _sidecar = Path(file)
    elif directory is not None:
        _sidecar = Path(directory) / "records.json"
    else:
        _sidecar = None
    return _default_sidecar()


def _write_sidecar(path: Path, records: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"records": records}, indent=1))


def _update_sidecar(path: Path, name: str, value: Any) -> None:
    """Add ``name`` to the sidecar under a lock beside it: two processes recording into one
    file (a notebook and its helper process, two kernels) each keep every record."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock", timeout=60):
        existing: dict[str, Any] = {}
        if path.exists():
            try:
                existing = _read_sidecar(path)
            except ZeusNbError as e:
                log.warning("%s; starting it afresh with %r", e, name)
                existing = {}
        existing[name] = value
        _write_sidecar(path, existing)


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _for_people(value: Any) -> Any:
    """``value`` with floats cut to 5 significant digits, for display only."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.5g}")
    if isinstance(value, dict):
        return {k: _for_people(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_for_people(v) for v in value]
    return value


def record(name: str, value: Any, display: bool = True, gpu: str | None = None) -> Any:
    """Keep ``value`` as result ``name`` of this notebook run; returns ``value`` unchanged.

    Recording a name again replaces the earlier value (re-running a cell is fine). ``gpu`` names
    the GPU that produced the value (``real: ...``, ``zeusd: ...``, ``simulated: ...``; default:
    the notebook's own, see :func:`set_gpu_source`); the saved record keeps it, and the line
    shown says it where it is not the notebook's own.
    """
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"record name must be a non-empty string, got {name!r}")
    plain = _plain(value, repr(name))
    _records[name] = plain
    source = gpu if gpu is not None else _gpu_source
    if source is not None:
        _gpu_sources[name] = source
    if display and _shell() is not None:
        from IPython.display import display as show

        text = json.dumps(_for_people(plain))  # the record keeps every digit
        if len(text) > 200:
            text = text[:197] + "..."
        if gpu is not None and gpu != _gpu_source:
            text += f"  [{gpu.split(' (')[0]}]"
        item = {"name": name, "value": plain}
        if source is not None:
            item["gpu"] = source
        show({MIMETYPE: item, "text/plain": f"{name} = {text}"}, raw=True)
    path = _default_sidecar()
    if path is not None:
        try:
            _update_sidecar(path, name, plain)
        except OSError as e:  # a side product: the value is still displayed and returned
            log.warning("could not write the records file %s (%s); %r is kept in the "
                        "notebook's output only", path, e.strerror or e, name)  # fmt: skip
    return value


def recorded() -> dict[str, Any]:
    """What this process recorded so far, by name."""
    return dict(_records)


def recorded_gpus() -> dict[str, str]:
    """The GPU that produced each record of this process, by record name."""
    return dict(_gpu_sources)


# --- reading back -------------------------------------------------------------------------------
def sidecar_of(notebook: str | Path) -> Path:
    """The sidecar file that belongs to an output notebook."""
    p = Path(notebook)
    return p.with_name(p.stem + SIDECAR_SUFFIX)


@reader(RECORDS_SIDECAR)
def _read_sidecar(path: Path) -> dict[str, Any]:
    """The records of a sidecar file; a damaged one is a :class:`ZeusNbError` naming it."""
    try:
        data = read_json(path, "records file")
    except OSError as e:
        raise ZeusNbError(f"{path}: not a readable records file ({e})") from None
    return check_record(data, RECORDS_SIDECAR, str(path))["records"]


@not_input(
    "a notebook, read by nbformat; unreadable is a ZeusNbError naming it "
    "(records.collect reports it and reads the others)"
)
def _read_ipynb(path: Path):
    try:
        return inputs.read_ipynb(path, "executed notebook")
    except OSError as e:  # our InputFileError (missing, a FIFO, too large...) or the OS's
        raise ZeusNbError(f"{e}; re-run it or leave it out") from None


def read_notebook(path: str | Path) -> dict[str, Any]:
    """Records, papermill parameters and status of one executed notebook (or sidecar file),
    and under ``gpus`` the GPU that produced each record, where the notebook says.

    A file that cannot be read raises :class:`ZeusNbError` naming it; reading never writes.
    """
    p = Path(path)
    if p.name.endswith(SIDECAR_SUFFIX):
        records = _read_sidecar(p)
        info = {"notebook": str(p), "status": "ok", "parameters": {}, "records": records}
        return info | {"gpus": {}}
    nb = _read_ipynb(p)
    records: dict[str, Any] = {}
    gpus: dict[str, str] = {}  # record name -> the GPU that produced it, where it says
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data")
            item = data.get(MIMETYPE) if isinstance(data, dict) else None
            if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
                records[item["name"]] = item["value"]
                if isinstance(item.get("gpu"), str):
                    gpus[item["name"]] = item["gpu"]
    side = sidecar_of(p)
    if side.exists():  # the sidecar has values the notebook could not display (e.g. no shell)
        try:
            for k, v in _read_sidecar(side).items():
                records.setdefault(k, v)
        except ZeusNbError as e:
            log.warning("%s; using the records shown in the notebook only", e)
    pm = nb.metadata.get("papermill", {})
    if not isinstance(pm, dict):
        pm = {}
    if pm.get("exception"):
        status = "failed"
    elif pm and pm.get("end_time") is None:
        status = "incomplete"
    else:
        status = "ok"
    return {
        "notebook": str(p),
        "status": status,
        "parameters": dict(pm.get("parameters") or {}),
        "records": records,
        "gpus": gpus,
    }


def _expand(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    found: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            # not NAME.partial.ipynb: what a killed run left (runner.notebooks.PARTIAL_NOTEBOOK)
            found += sorted(q for q in p.glob("*.ipynb") if not q.name.endswith(".partial.ipynb"))
            nbs = {q.stem for q in found}
            found += [
                q
                for q in sorted(p.glob("*" + SIDECAR_SUFFIX))
                if q.name.removesuffix(SIDECAR_SUFFIX) not in nbs
            ]
        elif p.exists():
            found.append(p)
        else:
            matches = sorted(glob.glob(str(item)))
            if not matches:
                raise FileNotFoundError(f"no notebook matches {str(item)!r}")
            found += [Path(m) for m in matches]
    return found


def collect(paths: str | Path | Iterable[str | Path]):
    """One DataFrame row per executed notebook: notebook, status, parameters, then records.

    ``paths`` are notebooks, sidecar files, directories (all ``*.ipynb`` in them) or glob patterns.
    A record named like a parameter gets the column ``result.<name>``. A file that cannot be
    read does not stop the others: its row has status ``unreadable`` and the reason in
    ``error`` (also logged as a warning). Nothing is written.
    """
    import pandas as pd

    rows = []
    for p in _expand(paths):
        try:
            info = read_notebook(p)
        except ZeusNbError as e:
            log.warning("%s", e)
            rows.append({"notebook": str(p), "status": "unreadable", "error": str(e)})
            continue
        row: dict[str, Any] = {"notebook": info["notebook"], "status": info["status"]}
        row.update(info["parameters"])
        for k, v in info["records"].items():
            row[f"result.{k}" if k in row else k] = v
        rows.append(row)
    return pd.DataFrame(rows)
