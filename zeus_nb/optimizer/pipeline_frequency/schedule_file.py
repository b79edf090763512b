"""What ``server_url`` names for Zeus's ``PipelineFrequencyOptimizer`` here: a schedule file.

Zeus's optimizer asks its PFO server for each rank's schedule; the server's default scheduler
(``PointSolution``) serves a fixed file written by the Perseus planner. zeus-nb has no server,
so ``server_url`` names that file directly, as a path or a ``file://`` URL, in one of these
forms:

* the planner's Python file (``freqs_pipeline_00042.py``): a list with one list per stage (or
  per rank) of ``(instruction, MHz)`` pairs in execution order, ``#`` comments allowed;
* zeus-nb's plan JSON: ``zeus-nb perseus plan PROFILE --deadline D --json`` (an object with a
  ``plan``), ``FrequencyPlan.to_json()`` (per stage, ``{"instruction", "microbatch",
  "frequency"}`` objects), or the same lists as the Python file;
* a JSON list of :class:`~zeus_nb.optimizer.pipeline_frequency.common.FrequencySchedule`
  objects (``{"rank", "frequencies"}``, as ``save_sched`` writes).

Every process reads the file itself, so no broadcast is needed; ``http(s)://`` URLs raise
:class:`ScheduleSourceError` saying what to pass.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

from zeus_nb.errors import InputError
from zeus_nb.inputs import read_text
from zeus_nb.inputs.registry import not_input

Schedule = list[tuple[str, int]]

FORMS = (
    "a frequency schedule file: the Perseus planner's freqs_pipeline_NNNNN.py, or a plan JSON "
    "from `zeus-nb perseus plan PROFILE --stages S --microbatches M --deadline D --json`, as a "
    "path or file:// URL"
)


class ScheduleSourceError(InputError):
    """``server_url`` does not name a readable frequency schedule."""


def schedule_path(server_url: str | Path) -> Path:
    """The file ``server_url`` names (a path or ``file://`` URL)."""
    text = str(server_url)
    scheme = urlparse(text).scheme.lower() if "://" in text else ""
    if scheme in ("http", "https"):
        raise ScheduleSourceError(
            f"server_url={text!r} is a PFO server; zeus-nb has no server: pass {FORMS}"
        )
    if scheme == "file":
        text = unquote(urlparse(text).path)
    elif scheme:
        raise ScheduleSourceError(f"server_url={text!r}: unknown scheme {scheme!r}; pass {FORMS}")
    path = Path(text).expanduser()
    if not path.is_file():
        raise ScheduleSourceError(f"server_url={text!r}: no such file; pass {FORMS}")
    return path


def _pairs(entries: object, where: str) -> Schedule:
    if not isinstance(entries, list):
        raise ScheduleSourceError(f"{where}: expected a list of (instruction, MHz) entries")
    out = []
    for e in entries:
        if isinstance(e, dict) and "instruction" in e and "frequency" in e:
            name, freq = e["instruction"], e["frequency"]
        elif isinstance(e, (list, tuple)) and len(e) == 2:
            name, freq = e
        else:
            raise ScheduleSourceError(f"{where}: entry {e!r} is not (instruction, MHz)")
        if not isinstance(name, str) or isinstance(freq, bool) or not isinstance(freq, int):
            raise ScheduleSourceError(f"{where}: entry {e!r} is not (instruction, MHz)")
        if not 0 < freq <= 10_000:
            raise ScheduleSourceError(f"{where}: {freq} is no SM clock; give MHz, e.g. 1410")
        out.append((name, int(freq)))
    return out


def parse_schedules(data: object, where: str) -> list[Schedule]:
    """One schedule per stage (or rank) from any of the module's forms, already decoded."""
    if isinstance(data, dict) and "plan" in data:
        data = data["plan"]
    if not isinstance(data, list) or not data:
        raise ScheduleSourceError(f"{where}: expected a non-empty list of schedules; see {FORMS}")
    if all(isinstance(d, dict) and "rank" in d and "frequencies" in d for d in data):
        data = [d["frequencies"] for d in sorted(data, key=lambda d: d["rank"])]
    return [_pairs(stage, f"{where}: schedule {i}") for i, stage in enumerate(data)]


@not_input(
    "Zeus's schedule file; each entry is checked there (an instruction name and an "
    "integer clock of 1 to 10000 MHz)"
)
def load_schedules(server_url: str | Path) -> list[Schedule]:
    """Read the schedule file ``server_url`` names (see the module docstring)."""
    path = schedule_path(server_url)
    text = read_text(path, "frequency schedule file")
    try:
        data = json.loads(text) if path.suffix != ".py" else ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        kind = "a Python literal" if path.suffix == ".py" else "JSON"
        raise ScheduleSourceError(f"{path}: not {kind} ({e}); pass {FORMS}") from None
    return parse_schedules(data, str(path))
