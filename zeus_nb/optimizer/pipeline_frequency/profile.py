"""Instruction profiles: the time and energy of each stage's forward and backward at each clock.

The CSV format is documented in ``docs/pipeline_frequency.md`` (section "The instruction profile
CSV"); :func:`load_profile` enforces it and names the file, line and column of anything wrong.
The file is plain CSV, so ``pandas.read_csv(path)`` reads it as it is; metadata (model, GPU,
how it was measured) lives beside it in ``PATH.json`` (:func:`sidecar_path`). Files written
before that kept metadata in leading ``#`` lines; they still load, their comments read as
metadata.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.errors import TraceFormatError
from zeus_nb.inputs import read_table, read_text, reader
from zeus_nb.inputs.kinds import INSTRUCTION_PROFILE
from zeus_nb.inputs.registry import not_input
from zeus_nb.utils.files import atomic_write, write_json

COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
INSTRUCTIONS = ("forward", "backward")
BLOCKING = "blocking"
HEADER_COMMENT = "# zeus-nb instruction profile v1"  # the first line of version-1 files
SIDECAR_FORMAT = "zeus-nb instruction profile"
SIDECAR_VERSION = 2


class ProfileFormatError(TraceFormatError):
    """An instruction profile does not follow the documented CSV format."""


@dataclass(frozen=True)
class Measurement:
    """One profiled instruction at one SM clock: seconds and joules per microbatch."""

    frequency: int
    time: float
    energy: float


@dataclass
class InstructionProfile:
    """Measurements per (stage, instruction) and each stage's blocking power (W)."""

    measurements: dict[tuple[int, str], list[Measurement]]
    blocking_power: dict[int, float]
    metadata: list[str] = field(default_factory=list)

    @property
    def num_stages(self) -> int:
        return len(self.blocking_power)

    def options(self, stage: int, instruction: str) -> list[Measurement]:
        """Measurements of one instruction of one stage, fastest clock first."""
        return sorted(self.measurements[(stage, instruction)], key=lambda m: -m.frequency)

    def fastest(self, stage: int, instruction: str) -> Measurement:
        return min(self.measurements[(stage, instruction)], key=lambda m: (m.time, -m.frequency))

    def at(self, stage: int, instruction: str, frequency: int) -> Measurement:
        for m in self.measurements[(stage, instruction)]:
            if m.frequency == frequency:
                return m
        raise KeyError(f"stage {stage} {instruction} was not profiled at {frequency} MHz")

    def check_stages(self, stages: int) -> None:
        if stages != self.num_stages:
            raise ProfileFormatError(
                f"the profile has {self.num_stages} stage(s) but {stages} were asked for; "
                "profile every stage of the pipeline you plan"
            )

    def to_csv(self, path: str | Path, blocking_time: float = 1.0) -> Path:
        """Write the documented CSV (blocking rows: ``blocking_time`` s at the blocking power)
        and its metadata beside it (:func:`sidecar_path`)."""
        path = Path(path)
        lines = [",".join(COLUMNS)]
        for stage in range(self.num_stages):
            for inst in INSTRUCTIONS:
                for m in self.options(stage, inst):
                    lines.append(f"{stage},{inst},{m.frequency},{m.time!r},{m.energy!r}")
            energy = self.blocking_power[stage] * blocking_time
            lines.append(f"{stage},{BLOCKING},,{blocking_time!r},{energy!r}")
        atomic_write(path, "\n".join(lines) + "\n")
        write_sidecar(path, self.metadata)
        return path


def sidecar_path(path: str | Path) -> Path:
    """Where a profile's metadata lives: ``prof.csv`` -> ``prof.csv.json``."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def write_sidecar(path: str | Path, metadata: list[str], **fields: object) -> Path:
    """Write the metadata lines (and any ``fields``) of the profile at ``path``."""
    doc = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, "metadata": list(metadata)}
    return write_json(sidecar_path(path), {**doc, **fields})


@not_input(
    "the metadata JSON zeus-nb writes beside a profile: text lines only, anything "
    "else is refused there"
)
def read_sidecar(path: str | Path) -> list[str]:
    """The metadata lines beside the profile at ``path`` (none when there is no sidecar)."""
    side = sidecar_path(path)
    if not side.is_file():
        return []
    try:
        doc = json.loads(read_text(side, "instruction profile metadata file"))
        lines = doc["metadata"] if doc.get("format") == SIDECAR_FORMAT else None
    except (ValueError, KeyError, TypeError, AttributeError):
        lines = None
    if not isinstance(lines, list):
        raise ProfileFormatError(
            f"{side}: not a zeus-nb profile metadata file (a JSON object with format "
            f"{SIDECAR_FORMAT!r} and a 'metadata' list); fix or remove it"
        )
    return [str(line) for line in lines]


@not_input("parses lines a caller read; load_profile reads files through the same schema")
def parse_profile(
    lines: Iterable[str], src: str = "<profile>", p2p_power: float | None = None
) -> InstructionProfile:
    """Parse and validate the lines of a profile CSV.

    ``p2p_power`` (W) is the blocking power of stages without ``blocking`` rows: the CSV of
    Zeus's ``InstructionProfilingResult.to_csv`` has none (Zeus's planner takes it as an
    argument, 70 W by default); rows of the file take precedence.

    Every cell and row is checked by :data:`zeus_nb.inputs.kinds.INSTRUCTION_PROFILE` (types,
    ranges, and energy / time a power a GPU can draw, which catches a profile in ms or mJ);
    here the profile's structure: stages 0..S-1, each with forward, backward and blocking rows,
    one row per (stage, instruction, frequency).
    """
    text = "\n".join(line.rstrip("\r\n") for line in lines) + "\n"
    try:
        table = read_table(src, INSTRUCTION_PROFILE, text=text)
    except TraceFormatError as e:
        raise ProfileFormatError(str(e)) from None
    return _structure(table, src, p2p_power)


def _structure(table, src: str, p2p_power: float | None = None) -> InstructionProfile:
    """The profile a checked table holds, with its structure checked too."""
    metadata = [c for c in table.comments if c != HEADER_COMMENT.lstrip("# ")]
    measurements: dict[tuple[int, str], list[Measurement]] = {}
    seen: dict[tuple[int, str, int], int] = {}
    blocking: dict[int, list[float]] = {}
    for row in table.rows:
        stage, inst, time, energy = row["stage"], row["instruction"], row["time"], row["energy"]
        if inst == BLOCKING:
            acc = blocking.setdefault(stage, [0.0, 0.0])
            acc[0] += energy
            acc[1] += time
            continue
        key = (stage, inst, row["frequency"])
        if key in seen:
            raise ProfileFormatError(
                f"{src}, line {row.line}: stage {stage} {inst} at {key[2]} MHz repeats line "
                f"{seen[key]}; keep one row per (stage, instruction, frequency)"
            )
        seen[key] = row.line
        measurements.setdefault((stage, inst), []).append(Measurement(key[2], time, energy))
    stages = sorted({s for s, _ in measurements} | set(blocking))
    if not stages:
        raise ProfileFormatError(f"{src}: no data rows")
    if stages != list(range(len(stages))):
        missing = sorted(set(range(max(stages) + 1)) - set(stages))
        raise ProfileFormatError(
            f"{src}: stages must be 0..S-1 without gaps; missing stage(s) {missing}"
        )
    for stage in stages:
        for inst in INSTRUCTIONS:
            if (stage, inst) not in measurements:
                raise ProfileFormatError(f"{src}: stage {stage} has no {inst!r} row")
    return InstructionProfile(
        measurements, _blocking_power(stages, blocking, p2p_power, src), metadata
    )


def _blocking_power(
    stages: list[int], blocking: dict[int, list[float]], p2p_power: float | None, src: str
) -> dict[int, float]:
    """Each stage's blocking power: its rows' energy over their time, else ``p2p_power``."""
    if p2p_power is not None and not (math.isfinite(p2p_power) and p2p_power > 0):
        raise ProfileFormatError(f"p2p_power must be a number of watts > 0, got {p2p_power!r}")
    power = {}
    for stage in stages:
        if stage in blocking:
            energy, time = blocking[stage]
            power[stage] = energy / time
        elif p2p_power is not None:
            power[stage] = float(p2p_power)
        else:
            raise ProfileFormatError(
                f"{src}: stage {stage} has no {BLOCKING!r} row; the planner needs each stage's "
                "power while it waits on communication (or pass p2p_power=WATTS)"
            )
    return power


@reader(INSTRUCTION_PROFILE)
def load_profile(path: str | Path, p2p_power: float | None = None) -> InstructionProfile:
    """Read and validate an instruction profile CSV (format: docs/pipeline_frequency.md).

    Metadata comes from ``PATH.json`` beside it, then from ``#`` lines of older files;
    ``p2p_power`` as in :func:`parse_profile`.
    """
    try:
        table = read_table(path, INSTRUCTION_PROFILE)
    except TraceFormatError as e:
        raise ProfileFormatError(str(e)) from None
    profile = _structure(table, str(path), p2p_power)
    profile.metadata = read_sidecar(path) + profile.metadata
    return profile
