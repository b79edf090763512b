"""The instruction profile CSV that ``python -m zeus_nb.train.pipeline --profile true`` writes.

Format (documented in ``docs/pipeline_frequency.md``): plain CSV, so ``pandas.read_csv`` reads
it; the header ``stage,instruction,frequency,time,energy`` and one row per (stage, instruction,
SM clock): the mean seconds and joules of one instruction on one microbatch, plus one
``blocking`` row per stage and clock (time blocked on the neighbour stages and the energy used
meanwhile). What was profiled (model, microbatch size, GPU, steps) is written beside it, in
``PATH.json``.

Profiling is resumable: rows are appended clock by clock and flushed, and a rerun skips every
clock whose rows are all in the file already. A file from before the metadata moved out (it
starts with ``#`` lines) is converted when it is resumed: its comments go to ``PATH.json``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from zeus_nb.errors import InputError, TraceFormatError, ZeusNbError
from zeus_nb.inputs import read_table, reader
from zeus_nb.inputs.kinds import INSTRUCTION_PROFILE
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_text
from zeus_nb.optimizer.pipeline_frequency.profile import sidecar_path, write_sidecar
from zeus_nb.utils import files
from zeus_nb.utils.files import atomic_write, unlocked_update

COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
ROW_KINDS = ("forward", "backward", "blocking")
MAGIC = "# zeus-nb instruction profile v1"  # the first line of files with comment metadata


class ProfileFileError(ZeusNbError, ValueError):
    """An existing profile file cannot be resumed."""


@reader(INSTRUCTION_PROFILE)
def existing_keys(path: Path) -> set[tuple[int, str, int]]:
    """(stage, instruction, frequency) of the rows already in ``path`` (empty if no file).

    Read through :data:`zeus_nb.inputs.kinds.INSTRUCTION_PROFILE`, so a damaged row is named
    (file, line, column) before profiling resumes on top of it.
    """
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return set()
    try:
        table = read_table(path, INSTRUCTION_PROFILE)
    except TraceFormatError as e:
        raise ProfileFileError(
            f"cannot resume: {e}; move the file away to profile from scratch"
        ) from None
    return {(r["stage"], r["instruction"], r["frequency"]) for r in table.rows}


def clocks_to_profile(path: Path, clocks: list[int], stages: int) -> list[int]:
    """The clocks of ``clocks`` that still lack a row for some stage and kind."""
    have = existing_keys(path)
    return [
        f
        for f in clocks
        if any((s, kind, f) not in have for s in range(stages) for kind in ROW_KINDS)
    ]


@not_input(
    "an older profile being resumed, which existing_keys read through "
    "INSTRUCTION_PROFILE first; only its # lines move"
)
@unlocked_update(
    "moves an older profile's comments out; only the profiling process that owns the file "
    "appends to it"
)
def uncomment(path: Path) -> None:
    """Move the leading ``#`` lines of an older profile into ``PATH.json`` (kept if present)."""
    lines = read_text(path, "instruction profile").splitlines(keepends=True)
    comments = [ln for ln in lines if ln.lstrip().startswith("#")]
    if not comments:
        return
    if not sidecar_path(path).is_file():
        notes = [ln.lstrip()[1:].strip() for ln in comments if ln.strip() != MAGIC]
        write_sidecar(path, notes)
    atomic_write(path, "".join(ln for ln in lines if not ln.lstrip().startswith("#")))


def append_rows(path: Path, rows: list[dict], metadata: dict[str, object]) -> int:
    """Append the rows whose key is new; write the header (and ``PATH.json``) first for a new
    file. Returns count.

    One write per call, whole rows only (:func:`zeus_nb.utils.files.append_line`): a full
    disk leaves the file as it was, and the caller may try the same rows again.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    have = existing_keys(path)
    new = [r for r in rows if (int(r["stage"]), r["instruction"], int(r["frequency"])) not in have]
    fresh = not path.is_file() or path.stat().st_size == 0
    if fresh:
        line = " ".join(f"{k}={v}" for k, v in metadata.items())
        write_sidecar(path, [line], profiling=dict(metadata))
    else:
        uncomment(path)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    if fresh:
        writer.writeheader()
    for r in new:  # every digit (repr round-trips a float): a plan predicts from these numbers
        writer.writerow({**r, "time": repr(float(r["time"])), "energy": repr(float(r["energy"]))})
    if text.getvalue():  # checked as load_profile will read them, then one write
        files.append_rows(path, text.getvalue(), INSTRUCTION_PROFILE, list(COLUMNS))
    return len(new)


def parse_clocks(spec: str | None, supported: list[int]) -> list[int]:
    """``--profile-clocks``: ``all`` (default), ``every:N`` (every Nth from the top, plus the
    lowest), or a comma list of MHz values, each one a supported clock."""
    supported = sorted(supported, reverse=True)
    if spec is None or spec.strip().lower() == "all":
        return supported
    spec = spec.strip().lower()
    if spec.startswith("every:"):
        try:
            n = int(spec.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"--profile-clocks {spec!r}: use every:N with N >= 1")
        picked = supported[::n]
        return picked if picked[-1] == supported[-1] else [*picked, supported[-1]]
    try:
        wanted = [int(v) for v in spec.split(",") if v.strip()]
    except ValueError:
        raise InputError(
            f"--profile-clocks {spec!r}: give 'all', 'every:N' or MHz values like 1740,1500"
        ) from None
    bad = [f for f in wanted if f not in supported]
    if bad or not wanted:
        raise InputError(
            f"--profile-clocks: {bad or spec} not supported; the GPU's clocks are "
            f"{supported[0]}..{supported[-1]} MHz ({len(supported)} values)"
        )
    return sorted(set(wanted), reverse=True)
