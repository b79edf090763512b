"""Instruction profiles: the time and energy of each stage's forward and backward at each clock.

The CSV format is documented in ``docs/pipeline_frequency.md`` (section "The instruction profile
CSV"); :func:`load_profile` enforces it and names the file, line and column of anything wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.errors import TraceFormatError
from zeus_nb.inputs import read_table, reader
from zeus_nb.inputs.kinds import INSTRUCTION_PROFILE
from zeus_nb.utils.files import atomic_write

COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
INSTRUCTIONS = ("forward", "backward")
BLOCKING = "blocking"
HEADER_COMMENT = "# zeus-nb instruction profile v1"


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
        """Write the documented CSV (blocking rows: ``blocking_time`` s at the blocking power)."""
        path = Path(path)
        lines = [HEADER_COMMENT, *(f"# {m}" for m in self.metadata), ",".join(COLUMNS)]
        for stage in range(self.num_stages):
            for inst in INSTRUCTIONS:
                for m in self.options(stage, inst):
                    lines.append(f"{stage},{inst},{m.frequency},{m.time!r},{m.energy!r}")
            energy = self.blocking_power[stage] * blocking_time
            lines.append(f"{stage},{BLOCKING},,{blocking_time!r},{energy!r}")
        atomic_write(path, "\n".join(lines) + "\n")
        return path


def parse_profile(lines: Iterable[str], src: str = "<profile>") -> InstructionProfile:
    """Parse and validate the lines of a profile CSV.

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
    return _structure(table, src)


def _structure(table, src: str) -> InstructionProfile:
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
    if stages != list(range(len(stages))):
        missing = sorted(set(range(max(stages) + 1)) - set(stages))
        raise ProfileFormatError(
            f"{src}: stages must be 0..S-1 without gaps; missing stage(s) {missing}"
        )
    for stage in stages:
        for inst in INSTRUCTIONS:
            if (stage, inst) not in measurements:
                raise ProfileFormatError(f"{src}: stage {stage} has no {inst!r} row")
        if stage not in blocking:
            raise ProfileFormatError(
                f"{src}: stage {stage} has no {BLOCKING!r} row; the planner needs each stage's "
                "power while it waits on communication"
            )
    power = {s: e / t for s, (e, t) in sorted(blocking.items())}
    return InstructionProfile(measurements, power, metadata)


@reader(INSTRUCTION_PROFILE)
def load_profile(path: str | Path) -> InstructionProfile:
    """Read and validate an instruction profile CSV (format: docs/pipeline_frequency.md)."""
    try:
        table = read_table(path, INSTRUCTION_PROFILE)
    except TraceFormatError as e:
        raise ProfileFormatError(str(e)) from None
    return _structure(table, str(path))
