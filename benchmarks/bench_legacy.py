"""Zeus's legacy simulator API on zeus-nb against Zeus's own simulator, same script, same knobs.

Per workload (V100 traces, eta 0.5, beta 2, N = 2 x |batch sizes| x |power limits| recurrences,
seeds 1..S): the mean cumulative energy saving of ``Simulator.simulate_one_job`` with the paper's
policies (``PruningGTSBatchSizeOptimizer(seed=s)``, ``JITPowerLimitOptimizer``), with one standard
error over the seeds, and the seconds the simulations took. The saving is against N runs of the
default batch size at the highest power limit, every run counted. ``zeus_nb._legacy`` always
runs; Zeus 0.16.0's ``zeus._legacy`` runs too when its source is importable (``$ZEUS_SRC``,
default /tmp/zeus/src). The two draw different random numbers under one seed, so they agree in
distribution, not run for run: compare the means with their standard errors.

    python benchmarks/bench_legacy.py [--seeds 20] [--workloads imagenet squad] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

from zeus_nb.data.traces import WORKLOADS, resource_path
from zeus_nb.optimizer.batch_size.simulator import workload_model

ZEUS_SRC = Path(os.environ.get("ZEUS_SRC", "/tmp/zeus/src"))


def _implementations() -> dict[str, str]:
    """Package prefix per implementation that can be imported here."""
    found = {"zeus_nb": "zeus_nb"}
    if (ZEUS_SRC / "zeus").is_dir() and str(ZEUS_SRC) not in sys.path:
        sys.path.append(str(ZEUS_SRC))
    try:
        importlib.import_module("zeus._legacy.simulate")
        found["zeus"] = "zeus"
    except ImportError:
        pass
    return found


def bench(package: str, workload: str, seeds: range) -> dict:
    job_mod = importlib.import_module(f"{package}._legacy.job")
    policy = importlib.import_module(f"{package}._legacy.policy")
    simulate = importlib.import_module(f"{package}._legacy.simulate")
    wl, model = WORKLOADS[workload], workload_model(workload, "v100")
    n, baseline = model.num_recurrences(), model.baseline_energy()
    train = pd.read_csv(resource_path("zeus_traces", "summary_train.csv"))
    power = pd.read_csv(resource_path("zeus_traces", "summary_power_v100.csv"))
    job = job_mod.Job(
        wl.dataset, wl.network, wl.optimizer, wl.target_metric, wl.max_epochs,
        model.default_batch_size,
    )  # fmt: skip
    savings = []
    start = time.perf_counter()
    for seed in seeds:
        bso = policy.PruningGTSBatchSizeOptimizer(seed=seed, verbose=False)
        plo = policy.JITPowerLimitOptimizer(verbose=False)
        sim = simulate.Simulator(train, power, bso, plo, seed=seed, verbose=False)
        # Zeus's simulator prints some lines whatever verbose says; keep them off the table.
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            history = sim.simulate_one_job(job, n, 2.0, 0.5)
        savings.append(1.0 - sum(h.energy for h in history) / (n * baseline))
    se = statistics.stdev(savings) / math.sqrt(len(savings)) if len(savings) > 1 else 0.0
    return {
        "implementation": package,
        "workload": workload,
        "recurrences": n,
        "seeds": len(savings),
        "cumulative_saving": statistics.fmean(savings),
        "se": se,
        "seconds": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workloads", nargs="+", default=["imagenet", "squad"])
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    impls = _implementations()
    if not args.json:
        print(f"{'workload':<14}{'N':>5}  {'implementation':<15}{'saving (± se)':>18}{'s':>9}")
    for workload in args.workloads:
        for package in impls:
            row = bench(package, workload, range(1, args.seeds + 1))
            if args.json:
                print(json.dumps(row))
            else:
                saving = f"{100 * row['cumulative_saving']:.2f}% ({100 * row['se']:.2f})"
                print(
                    f"{workload:<14}{row['recurrences']:>5}  {package:<15}{saving:>18}"
                    f"{row['seconds']:>9.2f}"
                )
    if "zeus" not in impls and not args.json:
        print(f"(Zeus's source is not importable from {ZEUS_SRC}: zeus_nb only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
