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
import os
from pathlib import Path

from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.pipeline_frequency.profile import sidecar_path, write_sidecar

COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
ROW_KINDS = ("forward", "backward", "blocking")
MAGIC = "# zeus-nb instruction profile v1"  # the first line of files with comment metadata


class ProfileFileError(ZeusNbError, ValueError):
    """An existing profile file cannot be resumed."""


def existing_keys(path: Path) -> set[tuple[int, str, int]]:
    """(stage, instruction, frequency) of the rows already in ``path`` (empty if no file)."""
    if not path.is_file():
        return set()
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines:
        return set()
    reader = csv.DictReader(lines)
    missing = set(COLUMNS) - set(reader.fieldnames or ())
    if missing:
        raise ProfileFileError(
            f"{path}: cannot resume, the header lacks {sorted(missing)}; move the file away to "
            "profile from scratch"
        )
    keys = set()
    for row in reader:
        try:
            keys.add((int(row["stage"]), row["instruction"], int(row["frequency"])))
        except (TypeError, ValueError):
            raise ProfileFileError(f"{path}: cannot resume, bad row {row}") from None
    return keys


def clocks_to_profile(path: Path, clocks: list[int], stages: int) -> list[int]:
    """The clocks of ``clocks`` that still lack a row for some stage and kind."""
    have = existing_keys(path)
    return [
        f
        for f in clocks
        if any((s, kind, f) not in have for s in range(stages) for kind in ROW_KINDS)
    ]


def uncomment(path: Path) -> None:
    """Move the leading ``#`` lines of an older profile into ``PATH.json`` (kept if present)."""
    lines = path.read_text().splitlines(keepends=True)
    comments = [ln for ln in lines if ln.lstrip().startswith("#")]
    if not comments:
        return
    if not sidecar_path(path).is_file():
        notes = [ln.lstrip()[1:].strip() for ln in comments if ln.strip() != MAGIC]
        write_sidecar(path, notes)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(ln for ln in lines if not ln.lstrip().startswith("#")))
    os.replace(tmp, path)


def append_rows(path: Path, rows: list[dict], metadata: dict[str, object]) -> int:
    """Append the rows whose key is new; write the header (and ``PATH.json``) first for a new
    file. Returns count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    have = existing_keys(path)
    new = [r for r in rows if (int(r["stage"]), r["instruction"], int(r["frequency"])) not in have]
    fresh = not path.is_file() or path.stat().st_size == 0
    if fresh:
        line = " ".join(f"{k}={v}" for k, v in metadata.items())
        write_sidecar(path, [line], profiling=dict(metadata))
    else:
        uncomment(path)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        if fresh:
            writer.writeheader()
        for r in new:
            writer.writerow({**r, "time": f"{r['time']:.9g}", "energy": f"{r['energy']:.9g}"})
        f.flush()
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
            raise ValueError(f"--profile-clocks {spec!r}: use every:N with N >= 1")
        picked = supported[::n]
        return picked if picked[-1] == supported[-1] else [*picked, supported[-1]]
    try:
        wanted = [int(v) for v in spec.split(",") if v.strip()]
    except ValueError:
        raise ValueError(
            f"--profile-clocks {spec!r}: give 'all', 'every:N' or MHz values like 1740,1500"
        ) from None
    bad = [f for f in wanted if f not in supported]
    if bad or not wanted:
        raise ValueError(
            f"--profile-clocks: {bad or spec} not supported; the GPU's clocks are "
            f"{supported[0]}..{supported[-1]} MHz ({len(supported)} values)"
        )
    return sorted(set(wanted), reverse=True)
