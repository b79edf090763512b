"""Shared pieces of the tests of zeus_nb._legacy (Zeus's legacy simulator API).

``EXAMPLE`` is a script in the shape of Zeus's single-job simulator example, written from Zeus's
documented API: read the trace CSVs, build a ``Job``, a ``PruningGTSBatchSizeOptimizer`` and a
``JITPowerLimitOptimizer``, run ``Simulator.simulate_one_job`` over 2 x |B| x |P| recurrences,
print and save the history. ``ZEUS_API`` records Zeus 0.16.0's signatures (parameter names and
defaults) and dataclass fields, so the tests check them without Zeus installed; the ``zeus``
fixture imports Zeus's source (``$ZEUS_SRC``, default /tmp/zeus/src) when it is there and skips
the tests that use it when not.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from zeus_nb._legacy.policy import PruningGTSBatchSizeOptimizer
from zeus_nb._legacy.simulate import HistoryEntry
from zeus_nb.data.traces import WORKLOADS, resource_path
from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.simulator import simulate, workload_model

REPO = Path(__file__).resolve().parents[1]
TRACES = resource_path("zeus_traces")
ZEUS_SRC = Path(os.environ.get("ZEUS_SRC", "/tmp/zeus/src"))

# An example in the shape of Zeus's single-job simulator script, written from its documented API.
EXAMPLE = '''
"""Replay a recurring training job on the Zeus traces under the paper's policies."""

from __future__ import annotations

import argparse
import dataclasses
from pprint import pprint

import pandas as pd

from zeus._legacy.job import Job
from zeus._legacy.policy import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
from zeus._legacy.simulate import HistoryEntry, Simulator


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace_dir", required=True)
    parser.add_argument("--dataset", default="librispeech")
    parser.add_argument("--model", default="deepspeech2")
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--target_metric", type=float, default=40.0)
    parser.add_argument("--max_epochs", type=int, default=16)
    parser.add_argument("--b_0", type=int, default=192)
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--eta_knob", type=float, default=0.5)
    parser.add_argument("--beta_knob", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num_recurrence", type=int, default=None)
    parser.add_argument("--save", default=None, help="CSV file for the history")
    return parser.parse_args(argv)


def main(argv=None) -> list[HistoryEntry]:
    args = parse_args(argv)
    train_df = pd.read_csv(f"{args.trace_dir}/summary_train.csv")
    power_df = pd.read_csv(f"{args.trace_dir}/summary_power_{args.gpu}.csv")
    job = Job(
        args.dataset, args.model, args.optimizer, args.target_metric, args.max_epochs, args.b_0
    )
    bso = PruningGTSBatchSizeOptimizer(seed=args.seed, verbose=False)
    plo = JITPowerLimitOptimizer(verbose=False)
    simulator = Simulator(train_df, power_df, bso, plo, seed=args.seed, verbose=False)
    num_recurrence = args.num_recurrence
    if num_recurrence is None:  # 2 x |batch sizes| x |power limits|, as in the paper
        rows = job.filter_df(train_df.merge(power_df, how="inner"))
        num_recurrence = 2 * rows.batch_size.nunique() * rows.power_limit.nunique()
    history = simulator.simulate_one_job(job, num_recurrence, args.beta_knob, args.eta_knob)
    pprint(history[-3:])
    if args.save:
        pd.DataFrame([dataclasses.asdict(h) for h in history]).to_csv(args.save, index=False)
    return history


if __name__ == "__main__":
    main()
'''


def ported(source: str) -> str:
    """The script with only its imports changed, as a user would port it."""
    return source.replace("from zeus.", "from zeus_nb.")


def load_example(source: str) -> dict:
    namespace = {"__name__": "example"}
    exec(compile(source, "example.py", "exec"), namespace)
    return namespace


def example_args(workload: str, gpu: str, seed: int, beta: float = 2.0, **extra) -> list[str]:
    wl = WORKLOADS[workload]
    b0 = workload_model(workload, gpu).default_batch_size  # librispeech's 256 is 192 here
    args = dict(
        trace_dir=TRACES,
        dataset=wl.dataset,
        model=wl.network,
        optimizer=wl.optimizer,
        target_metric=wl.target_metric,
        max_epochs=wl.max_epochs,
        b_0=b0,
        gpu=gpu,
        beta_knob=beta,
        seed=seed,
        **extra,
    )
    return [f"--{k}={v}" for k, v in args.items()]


def replayed(workload: str, gpu: str, seed: int, beta: float = 2.0, recurrences=None):
    """zeus-nb's own simulation of the same thing, as (bs, pl, energy, reached, time) rows."""
    result = simulate(
        workload,
        gpu,
        beta=beta,
        seed=seed,
        recurrences=recurrences,
        accounting="epoch",
        optimizer=PaperBatchSizeOptimizer,
    )
    h = result.history
    started = h[h["epochs"] > 0]  # the legacy history has no entry for a run never started
    rows = zip(
        started["batch_size"],
        started["power_limit"],
        started["energy"],
        started["reached"],
        started["time"],
        strict=True,
    )
    return result, [(int(b), float(p), e, bool(r), t) for b, p, e, r, t in rows]


def as_rows(history: list[HistoryEntry]) -> list[tuple]:
    return [(h.bs, float(h.pl), h.energy, h.reached, h.time) for h in history]


def same_runs(ours: list[tuple], theirs: list[tuple], rel: float = 1e-12) -> bool:
    """Equal (batch size, limit, reached) and energy and time within ``rel``, run for run."""
    if len(ours) != len(theirs):
        return False
    for (b, p, e, r, t), (b2, p2, e2, r2, t2) in zip(ours, theirs, strict=True):
        if (b, p, r) != (b2, p2, r2) or not np.allclose([e, t], [e2, t2], rtol=rel, atol=0):
            return False
    return True


def traces(gpu: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (
        pd.read_csv(TRACES / "summary_train.csv"),
        pd.read_csv(TRACES / f"summary_power_{gpu}.csv"),
    )


def paper_bso(seed: int, **kw) -> PruningGTSBatchSizeOptimizer:
    return PruningGTSBatchSizeOptimizer(seed=seed, verbose=False, **kw)


def group(starts, length, ratio=1.0) -> pd.DataFrame:
    """A submission schedule (times in s): its shape, not measured data, is what is tested."""
    return pd.DataFrame(
        {
            "start_time": [float(s) for s in starts],
            "end_time": [float(s) + length for s in starts],
            "runtime_ratio": ratio,
        }
    )


def same_calls(ours: list[tuple], theirs: list[tuple]) -> bool:
    """The same observe() calls: batch size and outcome equal, costs within 1e-9."""
    return len(ours) == len(theirs) and all(
        (b, c) == (b2, c2) and math.isclose(x, x2, rel_tol=1e-9)
        for (b, x, c), (b2, x2, c2) in zip(ours, theirs, strict=True)
    )


# -- Zeus 0.16.0's API, recorded: (parameter, default) per callable; REQ: no default. ---------

REQ = "REQ"
_BSO = {
    "register_job": [("job", REQ), ("batch_sizes", REQ)],
    "predict": [("job", REQ)],
    "observe": [("job", REQ), ("batch_size", REQ), ("cost", REQ), ("converged", None)],
}
_PLO = {
    "predict": [("job", REQ), ("batch_size", REQ)],
    "observe": [("job", REQ), ("batch_size", REQ), ("power_limit", REQ), ("cost", REQ)],
}
_SEED_VERBOSE = [("seed", 123456), ("verbose", True)]
ZEUS_API = {
    ("_legacy.job", "Job"): {
        "__init__": [
            ("dataset", REQ),
            ("network", REQ),
            ("optimizer", REQ),
            ("target_metric", REQ),
            ("max_epochs", REQ),
            ("default_bs", None),
            ("default_lr", None),
            ("workdir", None),
            ("command", None),
        ],
        "to_logdir": [],
        "filter_df": [("df", REQ)],
        "gen_command": [("batch_size", REQ), ("learning_rate", REQ), ("seed", REQ), ("rec_i", REQ)],
        "scale_lr": [("batch_size", REQ)],
    },
    ("_legacy.policy.interface", "BatchSizeOptimizer"): _BSO,
    ("_legacy.policy.interface", "PowerLimitOptimizer"): _PLO,
    ("_legacy.policy.mab", "GaussianTS"): {
        "__init__": [
            ("arms", REQ),
            ("reward_precision", REQ),
            ("prior_mean", 0.0),
            ("prior_precision", 0.0),
            ("num_exploration", 1),
            *_SEED_VERBOSE,
        ],
        "fit": [("decisions", REQ), ("rewards", REQ), ("reset", REQ)],
        "fit_arm": [("arm", REQ), ("rewards", REQ), ("reset", REQ)],
        "predict": [],
        "predict_expectations": [],
    },
    ("_legacy.policy.optimizer", "GTSBatchSizeOptimizer"): {
        "__init__": [
            ("learn_reward_precision", REQ),
            ("reward_precision", 0.0),
            ("prior_mean", 0.0),
            ("prior_precision", 0.0),
            ("num_exploration", 1),
            *_SEED_VERBOSE,
        ],
        **_BSO,
    },
    ("_legacy.policy.optimizer", "PruningExploreManager"): {
        "__init__": [("batch_sizes", REQ), ("default", REQ), ("num_pruning_rounds", 2)],
        "next_batch_size": [],
        "report_batch_size_result": [("batch_size", REQ), ("cost", REQ), ("reached", REQ)],
    },
    ("_legacy.policy.optimizer", "PruningGTSBatchSizeOptimizer"): {
        "__init__": [
            ("prior_mean", 0.0),
            ("prior_precision", 0.0),
            ("window_size", 0),
            ("concurrency", False),
            *_SEED_VERBOSE,
        ],
        **_BSO,
    },
    ("_legacy.policy.optimizer", "JITPowerLimitOptimizer"): {
        "__init__": [("verbose", True)],
        **_PLO,
    },
    ("_legacy.simulate", "HistoryEntry"): {
        "__init__": [("bs", REQ), ("pl", REQ), ("energy", REQ), ("reached", REQ), ("time", REQ)],
    },
    ("_legacy.simulate", "Simulator"): {
        "__init__": [
            ("summary_train", REQ),
            ("summary_power", REQ),
            ("batch_size_optimizer", REQ),
            ("power_limit_optimizer", REQ),
            *_SEED_VERBOSE,
        ],
        "simulate_one_job": [
            ("job", REQ),
            ("num_recurrence", REQ),
            ("beta_knob", REQ),
            ("eta_knob", REQ),
        ],
        "simulate_one_alibaba_group": [
            ("job", REQ),
            ("group_df", REQ),
            ("beta_knob", REQ),
            ("eta_knob", REQ),
        ],
        "_profile_power_limit": [("job", REQ), ("batch_size", REQ), ("eta_knob", REQ)],
        "_profile_batch_size_range": [("job", REQ)],
    },
    ("utils.lr_scaler", "SquareRootScaler"): {
        "__init__": [("bs", REQ), ("lr", REQ)],
        "compute_lr": [("new_bs", REQ)],
    },
    ("utils.lr_scaler", "LinearScaler"): {
        "__init__": [("bs", REQ), ("lr", REQ)],
        "compute_lr": [("new_bs", REQ)],
    },
}
# Dataclass fields, in order, and the properties that must exist.
ZEUS_FIELDS = {
    ("_legacy.job", "Job"): [
        "dataset",
        "network",
        "optimizer",
        "target_metric",
        "max_epochs",
        "default_bs",
        "default_lr",
        "workdir",
        "command",
    ],
    ("_legacy.simulate", "HistoryEntry"): ["bs", "pl", "energy", "reached", "time"],
    ("utils.lr_scaler", "SquareRootScaler"): ["bs", "lr"],
    ("utils.lr_scaler", "LinearScaler"): ["bs", "lr"],
}


def signature(func) -> list[tuple[str, object]]:
    return [
        (p.name, REQ if p.default is inspect.Parameter.empty else p.default)
        for p in inspect.signature(func).parameters.values()
        if p.name != "self"
    ]


def api(package: str) -> dict:
    """The recorded API's callables and fields as ``package`` (zeus or zeus_nb) has them."""
    found = {}
    for (module, name), methods in ZEUS_API.items():
        cls = getattr(importlib.import_module(f"{package}.{module}"), name)
        found[(module, name)] = {m: signature(getattr(cls, m)) for m in methods}
        if (module, name) in ZEUS_FIELDS:
            found[(module, name, "fields")] = [f.name for f in dataclasses.fields(cls)]
        if "Optimizer" in name:
            found[(module, name, "name")] = isinstance(
                inspect.getattr_static(cls, "name"), property
            )
    return found


def recorded() -> dict:
    out = {key: dict(methods) for key, methods in ZEUS_API.items()}
    for key, fields in ZEUS_FIELDS.items():
        out[(*key, "fields")] = fields
    for module, name in ZEUS_API:
        if "Optimizer" in name:
            out[(module, name, "name")] = True
    return out


def zeus_modules():
    """Zeus 0.16.0's modules from its source when importable, else skip (a fixture's body)."""
    added = str(ZEUS_SRC) not in sys.path and (ZEUS_SRC / "zeus").is_dir()
    if added:
        sys.path.insert(0, str(ZEUS_SRC))
    try:
        modules = {
            m: importlib.import_module(f"zeus.{m}")
            for m in ("_legacy.job", "_legacy.policy", "_legacy.simulate", "utils.lr_scaler")
        }
    except ImportError as e:
        pytest.skip(f"Zeus's source is not importable ({e}); set ZEUS_SRC to compare with it")
    else:
        yield SimpleNamespace(
            Job=modules["_legacy.job"].Job,
            policy=modules["_legacy.policy"],
            mab=importlib.import_module("zeus._legacy.policy.mab"),
            optimizer=importlib.import_module("zeus._legacy.policy.optimizer"),
            Simulator=modules["_legacy.simulate"].Simulator,
            lr_scaler=modules["utils.lr_scaler"],
        )
    finally:
        if added:
            sys.path.remove(str(ZEUS_SRC))
            for name in [m for m in sys.modules if m == "zeus" or m.startswith("zeus.")]:
                del sys.modules[name]
