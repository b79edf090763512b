"""HFGlobalPowerLimitOptimizer in a real transformers Trainer (tiny model, CPU, simulated GPU)."""

import subprocess
import sys

import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import Energy, PowerLimitMeasurement

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n=64, length=8, vocab=32):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, length), generator=g)
        self.y = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.y[i]}


def test_trainer_callback_profiles_and_restores(tmp_path, monkeypatch):
    from zeus_nb.optimizer.power_limit import HFGlobalPowerLimitOptimizer  # the upstream path

    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    system = device.use_simulated(num_gpus=1)
    system.gpus[0].set_power_limit(250.0)
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config)
    monitor = ZeusMonitor(gpu_indices=[0])
    plo = HFGlobalPowerLimitOptimizer(
        monitor,
        Energy(),
        wait_steps=1,
        warmup_steps=1,
        profile_steps=2,
        pl_step=100,
        adaptive=False,
        verbose=False,
    )
    seen = []

    class Spy(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            seen.append(system.gpus[0].get_power_limit())

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=14,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=RandomTokens(), callbacks=[plo, Spy()]
    )
    trainer.train()

    inner = plo.optimizer
    assert inner.done
    assert [m.power_limit for m in inner.measurements] == [300.0, 200.0, 100.0]
    expected = []
    for w in (300.0, 200.0, 100.0):  # each Trainer step advanced the simulated GPU once
        t, p = system.step_cost(system.batch_size, w)
        expected.append(PowerLimitMeasurement(w, 2 * t * p, 2 * t))
    for got, want in zip(inner.measurements, expected, strict=True):
        assert got.time == pytest.approx(want.time)
    assert inner.optimal_power_limit == Energy().select(expected)
    # the maximum from the start (Zeus's), 1 wait step, 3 steps per limit, then the optimum
    assert seen[:10] == [300.0] + [300.0] * 3 + [200.0] * 3 + [100.0] * 3
    assert seen[10:] == [inner.optimal_power_limit] * 4
    assert system.gpus[0].get_power_limit() == 250.0  # restored at on_train_end


def test_without_transformers_it_imports_and_using_it_names_the_extra(tmp_path):
    code = (  # importable without transformers, as Zeus's (its test imports it)
        "import sys; sys.modules['transformers'] = None\n"
        "from zeus_nb.optimizer import HFGlobalPowerLimitOptimizer\n"
        "HFGlobalPowerLimitOptimizer(None)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "ExtraMissingError" in proc.stderr and "pip install 'zeus-nb[hf]'" in proc.stderr


def test_demo_trainer_prints_no_raw_metrics_dict(tmp_path, capsys):
    """The notebook's Trainer says nothing itself: no ``{'train_runtime': ...}`` line."""
    from zeus_nb.train.demos import tiny_bert_trainer

    trainer = tiny_bert_trainer(tmp_path / "hf", max_steps=2)
    assert not any(
        isinstance(c, transformers.PrinterCallback) for c in trainer.callback_handler.callbacks
    )
    trainer.train()
    assert "train_runtime" not in capsys.readouterr().out
