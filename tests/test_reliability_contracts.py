"""Contracts a caller can rely on: units, answers independent of the calling process, the
simulated GPU answering only for what its trace measured, every public method checking its
arguments, dependency messages translated, and the held-out checks of the last probe."""

from __future__ import annotations

import inspect
import math
import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from zeus_nb import device
from zeus_nb.cli import main
from zeus_nb.errors import ZeusNbError

LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"
A40 = resources.files("zeus_nb") / "resources" / "zeus_traces" / "summary_power_a40.csv"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- units: plausible ranges per quantity, the likely unit named ---------------------------------
def _power_log(path: Path, scale: float) -> Path:
    rows = [f"2024-05-01 00:00:{s:02d}.000,{(200 + s) * scale:g}" for s in range(10)]
    path.write_text("Time,Power\n" + "\n".join(rows) + "\n")
    return path


def test_a_power_log_in_watts_is_refused_naming_the_unit(tmp_path):
    from zeus_nb.utils.metric import energy

    assert energy(_power_log(tmp_path / "mw.csv", 1000.0)) > 0  # Zeus's logs hold mW
    with pytest.raises(ZeusNbError, match="looks like W"):
        energy(_power_log(tmp_path / "w.csv", 1.0))


def test_clocks_in_khz_and_timestamps_in_ms_are_refused_naming_the_unit(tmp_path):
    from zeus_nb.inputs import check_record
    from zeus_nb.inputs.kinds import INSTRUCTION_PROFILE, POWER_LOG

    row = {"stage": "0", "instruction": "forward", "frequency": "100000", "time": "0.1",
           "energy": "20"}  # fmt: skip
    with pytest.raises(ZeusNbError, match="kHz"):
        check_record(row, INSTRUCTION_PROFILE, "profile", text_ok=True)
    with pytest.raises(ZeusNbError, match="ms since 1970"):
        check_record({"Time": "1714521600000", "Power": "250000"}, POWER_LOG, "log", True)


def test_every_intensive_quantity_has_a_range_that_excludes_a_unit_mistake():
    """The class: a column of a power or a clock has a range narrow enough that x1000 and
    /1000 of a real value fall outside it, and says which unit a value outside looks like."""
    from zeus_nb.inputs.kinds import JOB_MAX_POWER, JOB_POWER, SCHEMAS

    exempt = {
        JOB_POWER: "a job's power: its GPU count is unknown (docs/reliability.md)",
        JOB_MAX_POWER: "a stored job's max power: the sum over GPUs it does not count; checked "
        "per GPU where the count is known (the next test, docs/reliability.md)",
    }
    loose = []
    for schema in SCHEMAS.values():
        for col in schema.columns:
            q = col.quantity
            if q is None or q.unit not in ("W", "mW", "MHz") or q in exempt:
                continue
            if not (q.low > 0 and q.high / q.low <= 1e4 and q.mistakes):
                loose.append(f"{schema.name}.{col.name}: {q}")
    assert not loose, loose


def test_a_jobs_max_power_in_mw_is_refused_where_its_gpu_count_is_known():
    """Zeus's job records carry ``number_of_gpus``: each GPU's share of ``max_power`` is a
    power limit, so a sum in mW (or kW) is refused, while 8 GPUs of 700 W are not."""
    from zeus_nb.optimizer.batch_size.common import CreatedJob, GpuConfig, JobSpecFromClient

    assert GpuConfig(max_power=5600.0, number_of_gpus=8, gpu_model="H100").max_power == 5600.0
    with pytest.raises(ZeusNbError, match="300000 W per GPU.*looks like mW"):
        GpuConfig(max_power=600_000.0, number_of_gpus=2, gpu_model="A40")
    with pytest.raises(ZeusNbError, match="looks like kW"):
        GpuConfig(max_power=0.6, number_of_gpus=2, gpu_model="A40")
    job = {"job_id": "j-1", "job_id_prefix": "j", "batch_sizes": [8, 16], "default_batch_size": 8}
    for record in (JobSpecFromClient, CreatedJob):  # what Zeus's client and server exchange
        assert record(**job, max_power=300.0, number_of_gpus=1, gpu_model="A40")
        with pytest.raises(ZeusNbError, match="per GPU"):
            record(**job, max_power=3e5, number_of_gpus=1, gpu_model="A40")


# --- results independent of the calling process ---------------------------------------------------
def test_batch_size_cost_without_max_power_does_not_depend_on_the_reporting_gpu(tmp_path):
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer

    store = tmp_path / "jobs.sqlite3"
    device.use_simulated(gpu="a40")  # 300 W: the GPU the job is created on
    first = BatchSizeOptimizer("j", store, batch_sizes=[8, 16], default_batch_size=8)
    cost_a = first.report(8, time=10.0, energy=2000.0, reached=True)
    device.use_simulated(gpu="v100")  # another process, another GPU (250 W)
    second = BatchSizeOptimizer("j", store)
    cost_b = second.report(8, time=10.0, energy=2000.0, reached=True)
    assert cost_a == cost_b == pytest.approx(0.5 * 2000 + 0.5 * 300 * 10)
    assert second.job.max_power == 300.0


def test_a_monitor_bound_to_a_replaced_simulated_system_refuses_to_measure():
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated(gpu="a40")
    monitor = ZeusMonitor(gpu_indices=[0])
    device.use_simulated(gpu="v100")  # the steps now go to this one
    with pytest.raises(ZeusNbError, match="replaced"):
        monitor.begin_window("w")
    fresh = ZeusMonitor(gpu_indices=[0])
    fresh.begin_window("w")
    device.step(5)
    assert fresh.end_window("w").total_energy > 0


@pytest.mark.parametrize("index", [-1, 1.5, True, "0", 10**6])
def test_the_simulated_gpu_does_not_answer_for_any_index(index):
    system = device.use_simulated()
    with pytest.raises(ZeusNbError, match="index"):
        system.gpu(index)
    assert len(system.gpus) == 1


# --- the simulated GPU answers only for what its trace measured --------------------------------
def _trace(tmp_path: Path, keep) -> Path:
    lines = Path(str(A40)).read_text().splitlines()
    header = lines[0].split(",")
    rows = [ln for ln in lines[1:] if keep(dict(zip(header, ln.split(","), strict=True)))]
    path = tmp_path / "trace.csv"
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    return path


def test_a_batch_size_whose_curve_lacks_low_limits_is_not_clamped(tmp_path):
    trace = _trace(
        tmp_path,
        lambda r: (
            r["dataset"] == "imagenet"
            and (r["batch_size"] != "128" or float(r["power_limit"]) >= 175)
        ),
    )
    system = device.use_simulated(gpu=str(trace), workload="imagenet", batch_size=128)
    assert system.gpu(0).power_limit_constraints() == (175.0, 300.0)
    with pytest.raises(ZeusNbError, match="outside"):
        system.gpu(0).set_power_limit(100)
    with pytest.raises(ZeusNbError, match="only from 175 to 300 W"):
        system.step_cost(128, 100.0)
    # another batch size measured down to 100 W answers there, with what the trace measured
    watts = system.step_cost(64, 100.0)[1]
    measured = [r for r in system.trace.itertuples() if r.batch_size == 64 and r.power_limit == 100]
    assert watts == pytest.approx(measured[0].average_power)


def test_a_one_limit_trace_answers_only_at_that_limit(tmp_path):
    trace = _trace(tmp_path, lambda r: r["dataset"] == "imagenet" and r["power_limit"] == "300")
    system = device.use_simulated(gpu=str(trace), workload="imagenet")
    assert system.gpu(0).power_limit_constraints() == (300.0, 300.0)
    with pytest.raises(ZeusNbError):
        system.gpu(0).set_power_limit(100)


def test_average_power_above_a_low_limit_is_kept_as_measured():
    """The A40 traces record up to 20.7 W over the limit at 100 W: real, not clamped."""
    system = device.use_simulated(gpu="a40", workload="imagenet")
    over = [
        (r.batch_size, r.average_power)
        for r in system.trace.itertuples()
        if r.dataset == "imagenet" and r.power_limit == 100 and r.average_power > 100
    ]
    assert over
    bs, watts = max(over, key=lambda x: x[1])
    assert system.step_cost(bs, 100.0)[1] == pytest.approx(watts)


# --- every public method behind the boundary ------------------------------------------------------
def _bso():
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, MemoryStore

    return BatchSizeOptimizer(
        "j", MemoryStore(), batch_sizes=[8, 16], default_batch_size=8, max_power=300.0
    )


def _zeusd_gpu():
    from zeus_nb.device.gpu.nvidia import ZeusdNVIDIAGPU
    from zeus_nb.utils.zeusd import ZeusdClient, ZeusdConfig

    return ZeusdNVIDIAGPU(0, ZeusdClient(ZeusdConfig.tcp("node", 4938)))


def _factories():
    from zeus_nb.device.gpu.nvidia import NVIDIAGPU, NVIDIAGPUs, ZeusdNVIDIAGPU
    from zeus_nb.device.replay import ReplayGPU, ReplaySystem
    from zeus_nb.device.sim import SimulatedGPU, SimulatedSystem
    from zeus_nb.monitor.power import PowerMonitor
    from zeus_nb.optimizer.batch_size.optimizer import LocalBatchSizeOptimizer

    return {
        SimulatedSystem: lambda: device.use_simulated(),
        SimulatedGPU: lambda: device.use_simulated().gpu(0),
        ReplaySystem: lambda: ReplaySystem(str(LOG)),
        ReplayGPU: lambda: ReplaySystem(str(LOG)).gpu(0),
        LocalBatchSizeOptimizer: _bso,
        PowerMonitor: lambda: PowerMonitor(gpu_indices=[0], system=device.use_simulated()),
        # real GPUs, over the fake pynvml (and a fake zeusd) that the test installs for them
        NVIDIAGPUs: NVIDIAGPUs,
        NVIDIAGPU: lambda: NVIDIAGPU(0),
        ZeusdNVIDIAGPU: _zeusd_gpu,
    }


#: A valid value of each numeric parameter, so one bad value at a time is tried.
VALID = {"watts": 200.0, "power_limit": 200.0, "batch_size": 8, "n": 1, "index": 0,
         "min_mhz": 1410, "max_mhz": 1410, "mhz": 1410, "memory_mhz": 7251, "seconds": 1.0,
         "period": 0.1, "t": 1.0, "elapsed": 1.0, "time": 10.0, "energy": 2000.0,
         "epochs": 1, "num_samples": 1000, "start_time": None, "end_time": None,
         "gpu_index": 0, "start": None, "end": None, "power_limit_mw": 200_000,
         "min_clock_mhz": 1410, "max_clock_mhz": 1410, "memory_clock_mhz": 7251}  # fmt: skip
BAD = {"int": [math.nan, "3", True, 1.5, None], "float": [math.nan, math.inf, "200", True, None]}


def test_public_device_and_optimizer_classes_check_their_arguments():
    """The class: every GPU and GPU system, and the optimizers' public classes, are checked
    (``zeus_nb.inputs.api.checked_methods``) or say why not."""
    from test_reliability_discovery import _import_all

    from zeus_nb.device.base import GPU, GPUSystem
    from zeus_nb.inputs.api import CHECKED_CLASSES

    _import_all()

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    wanted = {*subclasses(GPU), *subclasses(GPUSystem), *_factories()}
    wanted = {c for c in wanted if c.__module__.startswith("zeus_nb")}
    missing = [
        f"{c.__module__}.{c.__qualname__}"
        for c in wanted
        if c not in CHECKED_CLASSES and not vars(c).get("__unchecked_arguments__", "").strip()
    ]
    assert not missing, f"not behind the argument boundary (zeus_nb.inputs.api): {missing}"
    assert set(CHECKED_CLASSES) <= set(_factories()), "a checked class without a factory here"


def _numeric_parameters(fn):
    from zeus_nb.inputs.api import _annotation, _kind

    sig = inspect.signature(inspect.unwrap(fn))
    for p in list(sig.parameters.values())[1:]:
        kind = _kind(_annotation(inspect.unwrap(fn), p))
        if kind is not None:
            yield p, kind


@pytest.mark.parametrize("cls", list(_factories()), ids=lambda c: c.__name__)
def test_every_public_method_refuses_bad_numbers_with_our_error(cls, request, monkeypatch):
    """``set_power_limit(64, 250000)``, ``power_timeline(period=nan)``, a simulated GPU's
    method given text, an NVML GPU's clock of NaN: each public method answers a bad number
    with our error, never stores or shows it (nor passes it on to NVML or zeusd)."""
    if cls.__module__ == "zeus_nb.device.gpu.nvidia":
        from zeusd_fake import FakeZeusd

        nvml = request.getfixturevalue("fake_nvml")
        zeusd = FakeZeusd(gpus=(0, 1))
        zeusd.patch(monkeypatch)
    tried = 0
    for name in dir(cls):
        if name.startswith("_") or not callable(getattr(cls, name)):
            continue
        fn = getattr(cls, name)
        params = list(_numeric_parameters(fn))
        for p, (kind, optional) in params:
            for bad in BAD[kind]:
                if bad is None and optional:
                    continue
                obj = _factories()[cls]()
                kwargs = {q.name: VALID[q.name] for q, _ in params if q.name != p.name}
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                kwargs[p.name] = bad
                with pytest.raises(ZeusNbError):
                    getattr(obj, name)(**kwargs)
                tried += 1
    assert tried
    if cls.__module__ == "zeus_nb.device.gpu.nvidia":  # nothing reached a GPU
        state = nvml.state
        assert state["set_calls"] == state["clock_calls"] == []
        assert nvml.limits_w() == [300.0, 300.0]
        assert all(d["memory_locked_clocks"] is None for d in state["devices"])
        assert [r for r in zeusd.seen if r[0] != "GET"] == []


def test_batch_size_set_power_limit_refuses_milliwatts():
    bso = _bso()
    with pytest.raises(ZeusNbError, match="mW"):
        bso.set_power_limit(8, 250000)
    assert bso.power_limit(8) is None


def test_power_timeline_refuses_a_nan_period():
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated()
    with pytest.raises(ZeusNbError, match="period"):
        ZeusMonitor(gpu_indices=[0]).power_timeline(period=math.nan)


# --- dependency errors translated -------------------------------------------------------------
def _store(tmp_path: Path) -> Path:
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer

    path = tmp_path / "jobs.sqlite3"
    BatchSizeOptimizer("j", path, batch_sizes=[8, 16], default_batch_size=8, max_power=300.0)
    return path


def test_a_text_schema_version_is_our_error(tmp_path, capsys):
    path = _store(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 'abc'")
    assert main(["bso", "show", "--store", str(path)]) == 2
    assert "schema_version" in _one_line(capsys.readouterr().err)


def test_a_not_null_constraint_is_explained(tmp_path):
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer

    path = _store(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE jobs RENAME TO old_jobs")
        conn.execute("CREATE TABLE jobs (name TEXT PRIMARY KEY, spec TEXT, owner TEXT NOT NULL)")
    with pytest.raises(ZeusNbError, match="another program changed") as e:
        BatchSizeOptimizer("k", path, batch_sizes=[8], default_batch_size=8, max_power=300.0)
    assert "NOT NULL" in str(e.value)  # what SQLite said, after what it means


class _FailingConnection:
    """A sqlite3 connection whose every statement fails as a failing disk makes it."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, *a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    executescript = execute

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_every_store_method_translates_a_disk_io_error(tmp_path):
    """The class: whatever a store method runs, SQLite's error reaches the caller as ours,
    saying what it means."""
    from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
    from zeus_nb.optimizer.batch_size.store import JobSpec, Observation

    args = {"name": "j", "after": 0, "batch_size": 8, "watts": 200.0, "spec":
            JobSpec("j", (8, 16), 8, max_power=300.0), "obs":
            Observation(8, 10.0, 2000.0, 2500.0, True, None), "trial_number": 1,
            "status": "succeeded", "observation": None, "job": "j"}  # fmt: skip
    store = SQLiteStore(_store(tmp_path))
    store._conn = _FailingConnection(store._conn)
    tried = 0
    for name, fn in inspect.getmembers(SQLiteStore, inspect.isfunction):
        if name.startswith("_") or name in ("close",):
            continue
        params = list(inspect.signature(fn).parameters)[1:]
        missing = [p for p in params if p not in args]
        assert not missing, f"add a value for {name}({missing}) here"
        with pytest.raises(ZeusNbError, match="disk") as e:
            fn(store, **{p: args[p] for p in params})
        assert "check the disk" in str(e.value), (name, e.value)
        tried += 1
    assert tried >= 6


def test_a_temporary_name_over_the_length_limit_names_the_target(tmp_path):
    from zeus_nb.utils.files import atomic_write

    ok = tmp_path / ("a" * 250)
    atomic_write(ok, "x")  # the name fits; its temporary sibling must too
    assert ok.read_text() == "x"
    too_long = tmp_path / ("b" * 300)
    with pytest.raises(OSError) as e:
        atomic_write(too_long, "x")
    assert e.value.filename == str(too_long)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ok.name]


# --- the held-out checks -----------------------------------------------------------------------
def test_bso_show_with_a_state_folder_that_is_a_file(tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    state.write_text("not a folder")
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(state))
    monkeypatch.delenv("ZEUS_NB_BSO_STORE", raising=False)
    assert main(["bso", "show"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(state) in line and "not a folder" in line


def test_a_train_trace_reaching_its_target_at_epoch_0_is_refused(tmp_path):
    from zeus_nb.data.traces import load_train_trace

    src = resources.files("zeus_nb") / "resources" / "zeus_traces" / "summary_train.csv"
    lines = Path(str(src)).read_text().splitlines()
    cells = lines[1].split(",")
    cells[-1] = "0"
    path = tmp_path / "train.csv"
    path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:50]]) + "\n")
    with pytest.raises(ZeusNbError, match="target_epoch"):
        load_train_trace(str(path))


def test_weights_must_be_finite_and_positive(tmp_path, capsys):
    for weights in ("nan,1", "inf,1", "-1,1", "0,1", "1,abc"):
        with pytest.raises(SystemExit) as e:
            main(["perseus", "synthetic", str(tmp_path / "p.csv"), "--stages", "2",
                  "--weights", weights])  # fmt: skip
        assert e.value.code == 2
        assert "--weights" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "p.csv").exists()


UNKNOWN_GPU = [
    ["tradeoff", "savings", "--gpu", "h100"],
    ["demo", "--gpu", "h100"],
    ["bso", "simulate", "--workload", "cifar100", "--gpu", "h100"],
]


@pytest.mark.parametrize("argv", UNKNOWN_GPU)
def test_an_unknown_gpu_name_lists_the_known_ones(argv, capsys):
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert "h100" in line and "a40" in line and "v100" in line, line


@pytest.mark.parametrize("port", ["abc", "99999", "0"])
def test_a_bad_port_in_a_store_url_is_a_usage_error(port, capsys):
    assert main(["bso", "show", "--store", f"postgresql://u:secret@127.0.0.1:{port}/db"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "port" in line and "internal error" not in line and "secret" not in line


# --- contradictions refused by name --------------------------------------------------------------
def test_p_values_are_typed_by_the_notebook_and_lists_pass_whole():
    from zeus_nb.runner.notebooks import declared_type, parse_value, parse_values

    undeclared = {"inferred_type_name": None, "default": "False"}  # smoke = False
    assert declared_type(undeclared) == "bool"
    assert parse_value("no", declared_type(undeclared)) is False
    assert parse_value("no") is False  # also with no type at all: never the truthy "no"
    assert parse_values("[300,200],[250,150]", "str") == [[300, 200], [250, 150]]
    with pytest.raises(ZeusNbError):
        parse_value("[1e999]", "str")


def test_optimizer_options_without_the_optimizer_are_refused(capsys):
    from zeus_nb.train.config import config_from_args
    from zeus_nb.train.launch import command

    for extra in (["--max-slowdown", "1.2"], ["--exhaustive"], ["--pl-step", "50"]):
        with pytest.raises(SystemExit) as e:
            config_from_args("single", ["--no-power-limit-optimizer", *extra])
        assert e.value.code == 2
        assert extra[0] in capsys.readouterr().err
    with pytest.raises(ZeusNbError, match="max_slowdown"):
        command("single", power_limit_optimizer=False, max_slowdown=1.2)
    assert config_from_args("single", ["--exhaustive"]).adaptive is False
    assert config_from_args("single", []).adaptive is True


def test_smoke_and_p_smoke_together_are_refused_by_sweep(tmp_path, capsys):
    assert main(["sweep", "01", "--smoke", "-p", "smoke", "false", "-o", str(tmp_path / "o")]) == 2
    assert "--smoke and -p smoke" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()
