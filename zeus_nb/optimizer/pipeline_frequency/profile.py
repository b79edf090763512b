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
        path.write_text("\n".join(lines) + "\n")
        write_sidecar(path, self.metadata)
        return path


def sidecar_path(path: str | Path) -> Path:
    """Where a profile's metadata lives: ``prof.csv`` -> ``prof.csv.json``."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def write_sidecar(path: str | Path, metadata: list[str], **fields: object) -> Path:
    """Write the metadata lines (and any ``fields``) of the profile at ``path``."""
    side = sidecar_path(path)
    doc = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, "metadata": list(metadata)}
    side.write_text(json.dumps({**doc, **fields}, indent=1) + "\n")
    return side


def read_sidecar(path: str | Path) -> list[str]:
    """The metadata lines beside the profile at ``path`` (none when there is no sidecar)."""
    side = sidecar_path(path)
    if not side.is_file():
        return []
    try:
        doc = json.loads(side.read_text())
        lines = doc["metadata"] if doc.get("format") == SIDECAR_FORMAT else None
    except (ValueError, KeyError, TypeError, AttributeError):
        lines = None
    if not isinstance(lines, list):
        raise ProfileFormatError(
            f"{side}: not a zeus-nb profile metadata file (a JSON object with format "
            f"{SIDECAR_FORMAT!r} and a 'metadata' list); fix or remove it"
        )
    return [str(line) for line in lines]


def _number(text: str, where: str, column: str, integer: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or (integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        raise ProfileFormatError(f"{where}: column {column!r} has {text!r}; expected {kind} > 0")
    return value


def _rows(lines: Iterable[str], src: str):
    """Yield (file line number, cells dict) for data rows; checks the header."""
    import csv

    header: list[str] | None = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in next(csv.reader([line]))]
        if header is None:
            header = [c.lower() for c in cells]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise ProfileFormatError(
                    f"{src}: line {lineno}: header lacks column(s) {', '.join(missing)}; "
                    f"expected the columns {', '.join(COLUMNS)} (see docs/pipeline_frequency.md)"
                )
            continue
        if len(cells) != len(header):
            raise ProfileFormatError(
                f"{src}: line {lineno}: {len(cells)} cells but the header has {len(header)}"
            )
        yield lineno, dict(zip(header, cells, strict=True))
    if header is None:
        raise ProfileFormatError(f"{src}: no header line; expected {','.join(COLUMNS)}")


def parse_profile(
    lines: Iterable[str], src: str = "<profile>", p2p_power: float | None = None
) -> InstructionProfile:
    """Parse and validate the lines of a profile CSV.

    ``p2p_power`` (W) is the blocking power of stages without ``blocking`` rows: the CSV of
    Zeus's ``InstructionProfilingResult.to_csv`` has none (Zeus's planner takes it as an
    argument, 70 W by default); rows of the file take precedence.
    """
    lines = list(lines)
    metadata = [
        ln.lstrip()[1:].strip()
        for ln in lines
        if ln.lstrip().startswith("#") and ln.strip() != HEADER_COMMENT
    ]
    measurements: dict[tuple[int, str], list[Measurement]] = {}
    seen: dict[tuple[int, str, int], int] = {}
    blocking: dict[int, list[float]] = {}
    for lineno, row in _rows(lines, src):
        where = f"{src}: line {lineno}"
        stage_text = row["stage"]
        if not stage_text.isdigit():
            raise ProfileFormatError(
                f"{where}: column 'stage' has {stage_text!r}; expected an integer >= 0"
            )
        stage = int(stage_text)
        inst = row["instruction"].lower()
        time = _number(row["time"], where, "time")
        energy = _number(row["energy"], where, "energy")
        if inst == BLOCKING:
            if row["frequency"]:
                _number(row["frequency"], where, "frequency", integer=True)
            acc = blocking.setdefault(stage, [0.0, 0.0])
            acc[0] += energy
            acc[1] += time
            continue
        if inst not in INSTRUCTIONS:
            raise ProfileFormatError(
                f"{where}: column 'instruction' has {row['instruction']!r}; expected "
                f"{', '.join(INSTRUCTIONS)} or {BLOCKING}"
            )
        freq = int(_number(row["frequency"], where, "frequency", integer=True))
        key = (stage, inst, freq)
        if key in seen:
            raise ProfileFormatError(
                f"{where}: stage {stage} {inst} at {freq} MHz repeats line {seen[key]}; "
                "keep one row per (stage, instruction, frequency)"
            )
        seen[key] = lineno
        measurements.setdefault((stage, inst), []).append(Measurement(freq, time, energy))
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


def load_profile(path: str | Path, p2p_power: float | None = None) -> InstructionProfile:
    """Read and validate an instruction profile CSV (format: docs/pipeline_frequency.md).

    Metadata comes from ``PATH.json`` beside it, then from ``#`` lines of older files;
    ``p2p_power`` as in :func:`parse_profile`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such instruction profile")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise ProfileFormatError(f"{path}: not a text CSV file ({e})") from e
    profile = parse_profile(text.splitlines(), str(path), p2p_power)
    profile.metadata = read_sidecar(path) + profile.metadata
    return profile
