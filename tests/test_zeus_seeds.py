"""Every code block of the source documents that uses Zeus's API, with only its imports changed.

Each block runs on the simulated GPU twice: on the wall clock (``ZEUS_NB_SIM_CLOCK=wall``), where
it must measure non-zero time and energy although it never calls ``zeus_nb.step()``, and on the
default virtual clock, where it must warn instead of printing zeros silently. Names a block takes
from its surroundings (a data loader, a training step, ``torch.cuda.current_device()``) come from
``_namespace``; the training step takes a couple of milliseconds, as real work would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from zeus_nb import device

REPO = Path(__file__).resolve().parents[1]

# Seed 001, "ZeusMonitor" (import changed: zeus -> zeus_nb).
SEED_001_MONITOR = """
from zeus_nb.monitor import ZeusMonitor

# All GPUs are measured simultaneously if `gpu_indices` is not given.
monitor = ZeusMonitor(gpu_indices=[torch.cuda.current_device()])

for epoch in range(100):
    monitor.begin_window("epoch")

    measurements = []
    for x, y in train_loader:
        monitor.begin_window("step")
        train_one_step(x, y)
        result = monitor.end_window("step")
        measurements.append(result)

    eres = monitor.end_window("epoch")
    print(f"Epoch {epoch} consumed {eres.time} s and {eres.total_energy} J.")

    avg_time = sum(map(lambda m: m.time, measurements)) / len(measurements)
    avg_energy = sum(map(lambda m: m.total_energy, measurements)) / len(measurements)
    print(f"One step took {avg_time} s and {avg_energy} J on average.")
"""

# Seed 001, "GlobalPowerLimitOptimizer" (the loop body's comment stands for a training step).
SEED_001_PLO = """
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer

# Data parallel training with four GPUs.
# Omitting `gpu_indices` will use all GPUs, while respecting
# `CUDA_VISIBLE_DEVICES`.
monitor = ZeusMonitor(gpu_indices=[0,1,2,3])
# The power limit optimizer profiles power limits during training
# using the `ZeusMonitor` instance.
plo = GlobalPowerLimitOptimizer(monitor)

for epoch in range(100):
    plo.on_epoch_begin()

    for x, y in train_dataloader:
        plo.on_step_begin()
        learn(x, y)  # Learn from x and y!
        plo.on_step_end()

    plo.on_epoch_end()

    # Validate the model if needed, but `plo` won't care.
"""

# Seed 002, "GlobalPowerLimitOptimizer": the same loop, importing from the power_limit module.
SEED_002_PLO = SEED_001_PLO.replace(
    "from zeus_nb.optimizer import GlobalPowerLimitOptimizer",
    "from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer",
)

# Seed 000, one monitor and optimizer per local rank, slowdown from ZEUS_MAX_SLOWDOWN as in its
# example scripts.
SEED_000_RANK = """
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer
from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint
from zeus_nb.utils.env import get_env

monitor = ZeusMonitor(gpu_indices=[local_rank]) # pass in local rank to gpu_indices.
plo = GlobalPowerLimitOptimizer(
    monitor,
    MaxSlowdownConstraint(factor=get_env("ZEUS_MAX_SLOWDOWN", float, 1.1)),
)
for epoch in range(100):
    plo.on_epoch_begin()
    for x, y in train_dataloader:
        plo.on_step_begin()
        learn(x, y)
        plo.on_step_end()
    plo.on_epoch_end()
"""

# Seed 003, the imports cell and the measured training cell (its undefined `n_epochs` is
# supplied; the cell is otherwise as written).
SEED_003 = """
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer
from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint
from zeus_nb.utils.env import get_env

n_max_iter = 1
MIN_VALIDATION_ACC = 0.65 #Stop training if validation accuracy reaches atleast MIN_VALIDATION_ACC
metrics = {'validation_acc': []}
train_acc,train_samples = 0,0

#Training for one epoch
monitor = ZeusMonitor(gpu_indices=[0])

try:
    monitor.begin_window("model_train")
# if the last measurement window is still running
except ValueError:
    _ = monitor.end_window("model_train")
    monitor.begin_window("model_train")

for epoch in range(n_max_iter):

    ##Train the model for one epoch

    # Train on training data
    train_one_epoch(train_loader)

    # Evaluate on validation data
    val_accuracy = eval_model(val_loader)
    metrics['validation_acc'].append(val_accuracy)

    print(f'Epoch {epoch+1}/{n_epochs} - Val_Accuracy: {val_accuracy:.4f}')


    if(val_accuracy>=MIN_VALIDATION_ACC):
        break

measurement = monitor.end_window("model_train")

#Checkout enegy and time required for one epoch
print("Measured time (s)  :" , measurement.time)
print("Measured energy (J):" , measurement.total_energy)
"""


# Seed 002, "HFGlobalPowerLimitOptimizer" (seed 001's block is the same without its imports). The
# snippet's ``...`` stands for the user's own Trainer arguments: ``trainer_args`` supplies them.
SEED_002_HF = """
from transformers import Trainer
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import HFGlobalPowerLimitOptimizer

monitor = ZeusMonitor()
plo = HFGlobalPowerLimitOptimizer(monitor)

# Also works with trl.SFTTrainer.
trainer = Trainer(
    **trainer_args,
    callbacks=[plo],
)
"""

# The rest of seed 003 either sweeps power limits through pynvml directly (not Zeus's API; on the
# simulated backend zeus-nb's fake-free path has no pynvml to call) or repeats the block above.


def _work(seconds: float = 0.002) -> None:
    time.sleep(seconds)


def _namespace() -> dict:
    batches = [(i, i) for i in range(10)]
    # Zeus's optimizer starts a power limit over when an epoch ends during it, so an epoch must
    # hold every limit's 50 steps: the A40's 9 limits, plus the wait step and the last one.
    epoch = [(i, i) for i in range(460)]
    return {
        "torch": types.SimpleNamespace(cuda=types.SimpleNamespace(current_device=lambda: 0)),
        "train_loader": batches[:3],
        "train_dataloader": epoch,
        "val_loader": batches[:2],
        "train_one_step": lambda x, y: _work(),
        "learn": lambda x, y: _work(0.0001),
        "train_one_epoch": lambda loader: [_work() for _ in loader],
        "eval_model": lambda loader: 0.7,
        "n_epochs": 1,
        "local_rank": 1,
    }


@pytest.fixture
def wall(monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    monkeypatch.setenv("ZEUS_NB_SIM_CLOCK", "wall")
    monkeypatch.delenv("ZEUS_NB_SIM_GPUS", raising=False)


@pytest.fixture
def virtual(monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    monkeypatch.delenv("ZEUS_NB_SIM_CLOCK", raising=False)


def _numbers(line: str) -> list[float]:
    return [float(w) for w in line.replace(":", " ").split() if w.replace(".", "", 1).isdigit()]


def test_seed_001_monitor_on_the_wall_clock(wall, capsys):
    exec(SEED_001_MONITOR, _namespace())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 200
    epoch_time, epoch_energy = _numbers(lines[-2])[1:]
    step_time, step_energy = _numbers(lines[-1])
    assert epoch_time > 3 * 0.002 and epoch_energy > 0
    assert step_time > 0.002 and step_energy > 0
    assert epoch_energy / epoch_time == pytest.approx(step_energy / step_time, rel=1e-3)


@pytest.mark.parametrize("source", [SEED_001_MONITOR, SEED_003], ids=["001", "003"])
def test_seed_monitor_blocks_warn_on_the_virtual_clock(virtual, source):
    with pytest.warns(UserWarning, match=r"no zeus_nb.step\(\) ran"):
        exec(source, _namespace())


def test_seed_003_on_the_wall_clock(wall, capsys):
    exec(SEED_003, _namespace())
    out = capsys.readouterr().out
    seconds = float(out.split("Measured time (s)  : ")[1].split()[0])
    joules = float(out.split("Measured energy (J): ")[1].split()[0])
    assert seconds >= 3 * 0.002 and joules > 0  # three 2 ms steps


@pytest.mark.slow  # profiles every power limit on the wall clock: waits on real time
@pytest.mark.parametrize("source", [SEED_001_PLO, SEED_002_PLO], ids=["001", "002"])
def test_seed_power_limit_optimizer_on_the_wall_clock(wall, source):
    ns = _namespace()
    exec(source, ns)
    plo = ns["plo"]
    assert len(device.current().gpus) == 4  # as many simulated GPUs as the code asked for
    assert plo.optimal_power_limit is not None
    assert plo.measurements and all(m.time > 0 and m.energy > 0 for m in plo.measurements)
    # the optimum is applied to every monitored GPU
    assert {g.get_power_limit() for g in device.current().gpus} == {plo.optimal_power_limit}


@pytest.mark.parametrize("source", [SEED_001_PLO, SEED_000_RANK], ids=["001", "000"])
def test_seed_power_limit_optimizer_warns_on_the_virtual_clock(virtual, source):
    with (
        pytest.warns(UserWarning, match=r"no zeus_nb.step\(\) ran"),
        pytest.warns(UserWarning, match="every profiling window measured 0 s"),
    ):
        # the virtual clock stands still through a step whatever it does: no need to sleep
        # (46,000 steps of 0.1 ms sleeps took 8.3 s of the fast tier's time)
        ns = _namespace() | {"learn": lambda x, y: None}
        try:
            exec(source, ns)
        except ZeroDivisionError:  # pragma: no cover - reported clearly below
            pytest.fail("zero measurements crashed the optimizer instead of warning")


@pytest.mark.slow  # profiles every power limit on the wall clock: waits on real time
def test_seed_000_rank_honours_zeus_max_slowdown(wall, monkeypatch):
    monkeypatch.setenv("ZEUS_MAX_SLOWDOWN", "1.25")
    ns = _namespace()
    exec(SEED_000_RANK, ns)
    plo = ns["plo"]
    assert plo.monitor.gpu_indices == [1]
    assert plo.optimum_selector.factor == 1.25
    assert plo.optimal_power_limit is not None


def _run(cmd: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_STATE_DIR=str(tmp_path / "state"))
    full.update(env)
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=300)


QUICK_FLAGS = [
    "--epochs", "1", "--train-size", "64", "--val-size", "32", "--image-size", "16",
    "--warmup-steps", "1", "--profile-steps", "2", "--pl-step", "100", "--no-progress",
]  # fmt: skip


@pytest.mark.slow
def test_seed_000_single_gpu_command(tmp_path):
    """``python train_single.py [DATA_DIR] --gpu 0`` as ``python -m zeus_nb.train.single``."""
    results = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "zeus_nb.train.single", "synthetic", "--gpu", "0"]
    r = _run(
        [*cmd, *QUICK_FLAGS, "--results", str(results)],
        tmp_path,
        ZEUS_NB_BACKEND="sim",
        ZEUS_MAX_SLOWDOWN="1.3",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(results.read_text())
    assert out["max_slowdown"] == 1.3 and out["time_s"] > 0 and out["energy_j"] > 0


@pytest.mark.slow
def test_seed_000_torchrun_command(tmp_path):
    """``torchrun --nnodes 1 --nproc_per_node N train_dp.py [DATA_DIR]``, module form.

    ``--nproc_per_node gpu`` is torchrun's own shorthand and needs CUDA, so N is given here.
    """
    results = tmp_path / "dp.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--standalone"]
    cmd += ["--nproc_per_node", "2", "-m", "zeus_nb.train.dp", "synthetic"]
    r = _run([*cmd, *QUICK_FLAGS, "--results", str(results)], tmp_path, ZEUS_NB_BACKEND="sim")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(results.read_text())
    assert out["world_size"] == 2 and out["energy_j"] > 0


def _hf_trainer_args(tmp_path: Path, steps: int) -> dict:
    """A tiny BERT on random tokens, trained on the CPU: the ``...`` of the seed's Trainer call."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    # 64 steps an epoch: Zeus's optimizer needs a limit's 50 steps within one epoch
    x = torch.randint(0, 32, (256, 8), generator=g)
    y = torch.randint(0, 2, (256,), generator=g)
    data = [{"input_ids": x[i], "labels": y[i]} for i in range(len(x))]
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=steps,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    model = transformers.BertForSequenceClassification(config)
    return {"model": model, "args": args, "train_dataset": data}


@pytest.mark.slow
def test_seed_002_hf_trainer_on_the_wall_clock(wall, tmp_path):
    # Zeus's defaults: 1 wait step, then 10 warm-up + 40 profiled steps per power limit, the
    # highest (the A40's 300 W) first; the run stops just after that first limit is measured.
    ns = {"trainer_args": _hf_trainer_args(tmp_path, 1 + 50 + 1)}
    exec(SEED_002_HF, ns)
    gpu = device.current().gpus[0]
    before = gpu.get_power_limit()
    ns["trainer"].train()
    measured = ns["plo"].optimizer.measurements
    assert [m.power_limit for m in measured] == [gpu.power_limit_constraints()[1]]
    assert measured[0].time > 0 and measured[0].energy > 0
    assert gpu.get_power_limit() == before  # restored when training ends


@pytest.mark.slow
def test_seed_002_hf_trainer_on_the_virtual_clock(virtual, tmp_path):
    """The callback advances the simulated GPU once per Trainer step, so no step() is missing."""
    ns = {"trainer_args": _hf_trainer_args(tmp_path, 1 + 50 + 1)}
    exec(SEED_002_HF, ns)
    system = device.current()
    top = system.gpus[0].power_limit_constraints()[1]
    ns["trainer"].train()
    (measured,) = ns["plo"].optimizer.measurements
    step_time, step_power = system.step_cost(system.batch_size, top)
    assert measured.time == pytest.approx(40 * step_time)
    assert measured.energy == pytest.approx(40 * step_time * step_power)
