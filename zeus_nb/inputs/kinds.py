"""Every kind of outside input zeus-nb reads, declared in one place.

Each schema says what its columns or fields may hold; :mod:`zeus_nb.inputs.table` and
:func:`~zeus_nb.inputs.schema.check_record` enforce it, and ``tests/test_reliability_battery.py``
feeds every reader of every schema the same battery of bad files. Ranges come from
:mod:`zeus_nb.inputs.validate`: wide enough for any real GPU, tight enough that 1000x off is not.
"""

from __future__ import annotations

import re

from zeus_nb.data.workloads import WORKLOADS  # the workloads' sample counts
from zeus_nb.inputs import validate as v
from zeus_nb.inputs.schema import Column, Ratio, Row, RowCheck, Schema, Spread
from zeus_nb.inputs.validate import AVERAGE_POWER, DURATION, ENERGY, POWER_LIMIT, Quantity

# --- shared columns ---------------------------------------------------------------------------
BATCH_SIZE = Column("batch_size", "integer", low=1, high=10**7)
ELAPSED = Quantity("time", "s", 0.0, DURATION.high)  # an empty window takes 0 s
JOB_POWER = Quantity("average power of a job", "W", 1.0, 2e6)  # 1 W to 1000 GPUs at 2 kW
SEED = Column("seed", "integer", low=0, high=2**32 - 1)


def _text(name: str, **kw) -> Column:
    return Column(name, "text", **kw)


# --- the Zeus traces (data/traces.py) ---------------------------------------------------------
def _step_time(row: Row) -> tuple[str, str] | None:
    """A traced epoch split into steps: a step longer than a minute is an epoch in ms (the
    slowest traced step takes 17 s)."""
    wl = WORKLOADS.get(str(row.get("dataset", "")).lower())
    if wl is None or row.get("time_per_epoch") is None:
        return None
    step = row["time_per_epoch"] / wl.steps_per_epoch(row["batch_size"])
    if step > 60:
        return "time_per_epoch", (
            f"{row['time_per_epoch']:g} s per epoch is {step:.3g} s per step of {wl.dataset} "
            f"at batch size {row['batch_size']}; check that it is in s, not ms"
        )
    return None


def _within_limit(row: Row) -> tuple[str, str] | None:
    power, limit = row.get("average_power"), row.get("power_limit")
    if power is not None and limit is not None and power > 1.5 * limit:
        return "average_power", (
            f"{power:g} W is more than 1.5x the power limit {limit:g} W; check the units (W) "
            "and the columns"
        )
    return None


_CURVE = ("dataset", "network", "batch_size", "optimizer")
POWER_TRACE = Schema(
    "power trace",
    (
        _text("dataset"),
        _text("network"),
        BATCH_SIZE,
        _text("optimizer"),
        Column("power_limit", quantity=POWER_LIMIT),
        Column("time_per_epoch", quantity=DURATION),
        Column("average_power", quantity=AVERAGE_POWER),
    ),
    key=(*_CURVE, "power_limit"),
    checks=(RowCheck(_within_limit), RowCheck(_step_time)),
    spreads=(Spread("time_per_epoch", _CURVE), Spread("average_power", _CURVE)),
    extra="ignore",
    fix="fix that cell (see docs/traces.md for the columns and units)",
)

TRAIN_TRACE = Schema(
    "train trace",
    (
        _text("dataset"),
        _text("network"),
        BATCH_SIZE,
        _text("optimizer"),
        Column("learning_rate", quantity=Quantity("learning rate", "", 0.0, 1e6, open_low=True)),
        Column("run", "integer", low=0, high=10**9),
        Column("target_metric", quantity=Quantity("target metric", "", -1e12, 1e12)),
        Column(
            "target_epoch",  # epochs count from 1: reaching the target at 0 means no training
            quantity=Quantity("epoch", "", 0, 1e7, open_low=True),
            empty_ok=True,
            missing=("nan", "NaN"),  # the run never reached the target
        ),
    ),
    key=("dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric"),
    extra="ignore",
    fix="fix that cell (see docs/traces.md for the columns)",
)


# --- ZeusMonitor logs (monitor/energy.py writes them, device/replay.py reads them) -------------
PROFILING_WINDOW = re.compile(r"^__GlobalPowerLimitOptimizer_(\d+(?:\.\d+)?)$")
RUN_DONE = "__GlobalPowerLimitOptimizer~done_{:g}"  # a finished profiling run's end (0 s, 0 J)
RUN_DONE_WINDOW = re.compile(r"^__GlobalPowerLimitOptimizer~done_(\d+(?:\.\d+)?)$")


def window_limit(row: Row, window: re.Pattern = PROFILING_WINDOW) -> float | None:
    """The limit a profiling window measured (``RUN_DONE_WINDOW``: the one its run chose)."""
    m = window.match(str(row.get("window_name", "")))
    return float(m.group(1)) if m else None


def _profiling_window(row: Row) -> tuple[str, str] | None:
    limit = window_limit(row)
    if limit is None:
        return None
    if not POWER_LIMIT.low < limit <= POWER_LIMIT.high:
        return "window_name", f"{limit:g} W is not a power limit a GPU can have"
    if row.get("elapsed_time") == 0:
        return "elapsed_time", "a profiling window of 0 s measured nothing; delete that row"
    return None


MONITOR_LOG = Schema(
    "ZeusMonitor log",
    (
        Column("start_time", quantity=Quantity("start time", "s", -1e12, 1e12)),
        _text("window_name"),
        Column("elapsed_time", quantity=ELAPSED),
        # empty: the monitor had no valid energy for that GPU in that window (see log_file.py)
        Column(r"gpu(\d+)_energy", quantity=ENERGY, pattern=True, empty_ok=True),
    ),
    key=("start_time", "window_name"),
    checks=(
        RowCheck(_profiling_window),
        Ratio(
            r"gpu\d+_energy",
            "elapsed_time",
            when=lambda r: window_limit(r) is not None,
            cap=window_limit,
            fix="check that energy is in J and time in s",
            quantum=v.COUNTER_PERIOD,
        ),
    ),
    lead=("start_time", "window_name", "elapsed_time"),
    runs=True,
    appended=True,
    fix="fix or delete that row (re-profile the limit if its numbers are lost)",
)


# --- Zeus's power logs (utils/metric.py: energy and avg_power of a log) -----------------------
POWER_LOG = Schema(
    "power log",
    (
        Column("Time", "time"),
        Column("Power", quantity=v.POWER_SAMPLE_MW),  # in mW, as Zeus writes it
    ),
    key=("Time",),
    extra="ignore",
    appended=True,  # a power monitor appends a row per sample
    min_rows=2,
    max_bytes=32 << 20,  # a day of samples at 10 Hz
    fix="want Time (a timestamp) and Power (mW) per row",
)


# --- Perseus instruction profiles (train/pipeline/profile.py, optimizer/pipeline_frequency) ----
INSTRUCTIONS = ("forward", "backward", "blocking")
INSTRUCTION_PROFILE = Schema(
    "instruction profile",
    (
        Column("stage", "integer", low=0, high=10**4),
        Column("instruction", "choice", choices=INSTRUCTIONS),
        Column("frequency", "integer", v.CLOCK, low=1, high=10**5, empty_ok=True),
        Column("time", quantity=DURATION),
        Column("energy", quantity=Quantity("energy", "J", 0.0, ENERGY.high, open_low=True)),
    ),
    # (stage, instruction, frequency) is unique for forward and backward rows; blocking rows
    # of one stage are summed (time and energy), so the planner's check is in parse_profile.
    checks=(
        RowCheck(
            lambda r: (
                None
                if r.get("frequency") is not None or r.get("instruction") == "blocking"
                else ("frequency", "the value is empty; only blocking rows may leave it empty")
            )
        ),
        Ratio("energy", "time", fix="check the units: time in s and energy in J, not ms or mJ"),
    ),
    spreads=(Spread("time", ("stage", "instruction"), 100.0),),
    comment="#",
    extra="ignore",
    appended=True,
    fix="see docs/pipeline_frequency.md for the format",
)


# --- power-limit profiles (optimizer/power_limit/profile_file.py) -----------------------------
PL_MEASUREMENT = Schema(
    "power-limit measurement",
    (
        Column("power_limit", quantity=POWER_LIMIT),
        Column("energy", quantity=ENERGY),
        Column("time", quantity=DURATION),
        Column("num_gpus", "integer", low=1, high=1 << 16, optional=True),
    ),
    checks=(Ratio("energy", "time", per="num_gpus", quantum=v.COUNTER_PERIOD),),
    extra="ignore",
)


# --- state files of changed GPU settings (device/guard.py, device/recovery.py) ----------------
STATE_FILE = Schema(
    "device settings state file",
    (
        Column(
            "format", "choice", choices=("zeus-nb device settings", "zeus-nb power-limit state")
        ),
        _text("host"),
        Column("pid", "integer", low=1, high=2**31),
        _text("backend"),
        Column("cuda_visible_devices", "any", optional=True, empty_ok=True),
        Column("settings", "any", optional=True),
        Column("limits", "any", optional=True),
    ),
    extra="ignore",
    fix="delete the file if its GPUs were restored by hand",
)
STATE_SETTING = Schema(
    "recorded GPU setting",
    (
        Column("gpu", "integer", low=0, high=1 << 16),
        _text("kind"),
        Column("original", "any", empty_ok=True),
    ),  # None: locked clocks the driver chose
    extra="ignore",
    fix="delete the file if its GPUs were restored by hand",
)


# --- records sidecars and frequency plans -------------------------------------------------------
RECORDS_SIDECAR = Schema(
    "records file",
    (Column("records", "any"),),
    checks=(
        RowCheck(
            lambda r: (
                None
                if isinstance(r.get("records"), dict)
                else ("records", "is not an object of name: value")
            )
        ),
    ),
    extra="ignore",
    fix="delete the file or re-run its notebook",
)
PLAN = Schema(
    "frequency plan",
    (
        Column("plan", "any"),
        Column("iteration_time", quantity=DURATION, optional=True),
        Column("energy", quantity=ENERGY, optional=True),
    ),
    # the energy of all stages over one iteration: at least 1 W (time in ms is not)
    checks=(Ratio("energy", "iteration_time", JOB_POWER, when=lambda r: bool(r.get("energy"))),),
    extra="ignore",
    fix="save one frontier point: zeus-nb perseus plan ... --deadline SECONDS --json > plan.json",
)


# --- run_sweep results (runner/sweep.py) ------------------------------------------------------
def _measured(row: Row) -> bool:
    """A run that measured something (0 s: train_fn never stepped the GPU)."""
    return bool(row.get("time")) and bool(row.get("energy"))


SWEEP_RESULT = Schema(
    "sweep result",
    (
        BATCH_SIZE,
        Column("power_limit", quantity=POWER_LIMIT),
        Column("epochs", "integer", low=0, high=10**7, optional=True),
        Column("metric", optional=True),
        Column("reached", "bool", optional=True),
        Column("time", quantity=ELAPSED, optional=True),
        Column("energy", quantity=ENERGY, optional=True),
        Column("target_metric", optional=True),
        Column("max_epochs", "integer", low=1, high=10**7, optional=True),
        Column("higher_is_better", "bool", optional=True),
        Column("num_gpus", "integer", low=1, high=1 << 16, optional=True),
    ),
    checks=(
        # a run that took time and energy drew a possible power: per GPU where the row says how
        # many (catches ms and mJ), else for the whole job (catches ms)
        Ratio(
            "energy",
            "time",
            per="num_gpus",
            when=lambda r: _measured(r) and "num_gpus" in r,
            cap=lambda r: r.get("power_limit"),
            quantum=v.COUNTER_PERIOD,
        ),
        Ratio(
            "energy",
            "time",
            JOB_POWER,
            when=lambda r: _measured(r) and "num_gpus" not in r,
            quantum=v.COUNTER_PERIOD,
        ),
    ),  # fmt: skip
    key=("batch_size", "power_limit"),
    extra="ignore",
    appended=True,
    fix="pass another results_path or delete the file to start over",
)


# --- carbon intensity and electricity price CSVs (monitor/providers.py) ------------------------
def intensity_csv(value_column: str = "value", time_column: str = "time") -> Schema:
    """``time,<value>`` rows: one value per time, finite and >= 0 (grams of CO2 or a price
    per kWh: up to 1e6, so a value in mg or a price in cents still fits; only NaN, negative
    and absurd values are refused)."""
    return Schema(
        "intensity CSV",
        (
            Column(time_column, "time"),
            Column(value_column, quantity=Quantity("value", "", 0.0, 1e6)),
        ),
        key=(time_column,),
        extra="ignore",
        fix="give a time (Unix seconds or ISO 8601) and a number per row",
    )


INTENSITY_CSV = intensity_csv()
# What the HTTP services answer, checked like a file: ElectricityMaps' history, OpenEI's rates.
ELECTRICITYMAPS_POINT = Schema(
    "ElectricityMaps history entry",
    (
        Column("datetime", "time"),
        Column("carbonIntensity", quantity=Quantity("carbon intensity", "g/kWh", 0.0, 1e5)),
    ),
    extra="ignore",
)
OPENEI_PERIOD = Schema(
    "OpenEI rate period",
    (Column("rate", quantity=Quantity("electricity price", "$/kWh", 0.0, 1e3)),),
    extra="ignore",
)


# --- the batch-size optimizer's store rows and arguments (optimizer/batch_size) ---------------
# A run that reached the target took time; its energy may read 0 J when it was shorter than the
# counter's period (the ratio check allows that, and only that).
OBSERVATION = Schema(
    "batch-size optimizer run",
    (
        BATCH_SIZE,
        Column("time", quantity=DURATION),
        Column("energy", quantity=ENERGY),
        Column("cost", quantity=Quantity("cost", "J", 0.0, 1e15), optional=True),
        Column("reached", "bool"),
        Column("power_limit", quantity=POWER_LIMIT, optional=True, empty_ok=True),
    ),
    checks=(
        Ratio(
            "energy", "time", JOB_POWER, fix="check the units (J and s)", quantum=v.COUNTER_PERIOD
        ),
    ),
    fix="report what the run measured: seconds and joules",
)
_RUN_COLUMNS = (
    BATCH_SIZE,
    Column("time", quantity=ELAPSED),
    Column("energy", quantity=ENERGY),
    Column("cost", quantity=Quantity("cost", "J", 0.0, 1e15), optional=True),
    Column("reached", "bool"),
    Column("power_limit", quantity=POWER_LIMIT, optional=True, empty_ok=True),
)
# A run that failed, possibly before it started: 0 s and 0 J are possible, NaN and < 0 are not.
FAILED_OBSERVATION = Schema(
    "batch-size optimizer failed run",
    _RUN_COLUMNS,
    fix="report what the run measured: seconds and joules",
)
# A row of a store (SQLite, PostgreSQL): every run as reported (checked then), and its cost.
STORED_RUN = Schema(
    "batch-size optimizer store row",
    tuple(Column("cost", quantity=Quantity("cost", "J", 0.0, 1e15)) if c.name == "cost" else c
          for c in _RUN_COLUMNS),
)  # fmt: skip
# A job's MaxPower is the sum of its GPUs' maximum limits (8 GPUs of 700 W: 5600 W).
JOB_MAX_POWER = Quantity("max power of a job (all its GPUs)", "W", 1.0, 2e6, open_low=True)

JOB_SPEC = Schema(
    "batch-size optimizer job",
    (
        _text("name"),
        Column("batch_sizes", "integers", low=1, high=10**7),
        Column("default_batch_size", "integer", low=1, high=10**7),
        Column("eta", quantity=Quantity("eta", "", 0.0, 1.0)),
        Column("beta", quantity=Quantity("beta", "", 1.0, 1e300, open_low=True), empty_ok=True),
        Column("max_power", quantity=JOB_MAX_POWER, optional=True, empty_ok=True),
        Column("seed", "integer", low=0, high=2**32 - 1, optional=True),
        Column("pruning_rounds", "integer", low=0, high=1000, optional=True),
        Column("window", "integer", low=0, high=10**9, optional=True),
        Column("exploration", quantity=Quantity("exploration", "", 0.0, 1e3), optional=True),
    ),
    fix="see help(zeus_nb.optimizer.batch_size.BatchSizeOptimizer)",
)


# --- notebook setup and training-step arguments -----------------------------------------------
NOTEBOOK_SETUP = Schema(
    "notebook_setup arguments",
    (
        Column("backend", "choice", choices=("auto", "sim", "nvml")),
        SEED,
        _text("sim_gpu"),
        _text("sim_workload"),
        Column("sim_noise", quantity=v.NOISE),
        Column("quiet", "bool"),
    ),
    fix="see help(zeus_nb.notebook_setup)",
)

# Every schema, by name: the battery and the Hypothesis suite run over all of them.
SCHEMAS: dict[str, Schema] = {
    s.name: s
    for s in (
        POWER_TRACE,
        TRAIN_TRACE,
        MONITOR_LOG,
        POWER_LOG,
        INSTRUCTION_PROFILE,
        PL_MEASUREMENT,
        STATE_FILE,
        STATE_SETTING,
        SWEEP_RESULT,
        RECORDS_SIDECAR,
        PLAN,
        INTENSITY_CSV,
        ELECTRICITYMAPS_POINT,
        OPENEI_PERIOD,
        OBSERVATION,
        FAILED_OBSERVATION,
        STORED_RUN,
        JOB_SPEC,
        NOTEBOOK_SETUP,
    )
}
