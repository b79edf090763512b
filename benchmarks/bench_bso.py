"""Benchmark the batch-size optimizer on the six V100 workloads of the Zeus traces.

Per workload: eta 0.5, beta 2, N = 2 x |batch sizes| x |power limits| recurrences, seeds 1..10.
Prints the mean cumulative energy saving (every run counted, failed and early-stopped ones
included) against N runs of the default batch size at the highest power limit, with one standard
error over the seeds; the same saving over the last 10 recurrences; the configuration most seeds
converged to; and the seconds the optimizer's simulations took.

Two comparisons:

* ``paper``: the published policy (:class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer`,
  the same pruning with the Zeus paper's Thompson step) on the same seeds and the same simulated
  runs, and ``vs paper`` the paired difference with one standard error. This is the comparison
  that ten seeds can resolve.
* ``target``: the cumulative savings published for the original Zeus simulator on these traces
  and knobs, given to 0.1 point. They are ten-seed means themselves, so they carry the same
  noise as ours (about 0.5 point for squad).

Runs are charged by whole epochs by default (``--accounting epoch``), as the simulator behind the
published figures charges them; ``--accounting step`` charges them step by step, as this package's
optimizers run (see ``zeus_nb.optimizer.batch_size.simulator``).

    python benchmarks/bench_bso.py [--json] [--seeds 10] [--first-seed 1] [--gpu v100]
                                   [--accounting epoch|step]

``--first-seed 11 --seeds 300`` reruns it on the held-out seeds 11..310 on which the optimizer's
knobs were chosen.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter

from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.simulator import ACCOUNTING, simulate, workload_model

WORKLOADS = ("librispeech", "squad", "sentiment140", "imagenet", "cifar100", "movielens-1m")
TARGET = {  # published, to 0.1 point
    "librispeech": 0.354,
    "squad": 0.177,
    "sentiment140": 0.192,
    "imagenet": 0.146,
    "cifar100": 0.716,
    "movielens-1m": 0.625,
}
TIME_BUDGET_S = 10.0  # for the six workloads x 10 seeds


def _se(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0


def bench(
    workload: str,
    gpu: str,
    seeds: range,
    eta: float,
    beta: float,
    accounting: str = "epoch",
) -> dict:
    start = time.perf_counter()
    model = workload_model(workload, gpu, eta)
    results = [simulate(model, beta=beta, seed=s, accounting=accounting) for s in seeds]
    seconds = time.perf_counter() - start
    paper = [
        simulate(model, beta=beta, seed=s, accounting=accounting, optimizer=PaperBatchSizeOptimizer)
        for s in seeds
    ]
    configs = Counter(r.converged for r in results)
    (bs, pl), count = configs.most_common(1)[0]
    cum = [r.cumulative_saving for r in results]
    diff = [r.cumulative_saving - p.cumulative_saving for r, p in zip(results, paper, strict=True)]
    return {
        "workload": workload,
        "gpu": gpu,
        "accounting": accounting,
        "recurrences": results[0].recurrences,
        "default_batch_size": model.default_batch_size,
        "seeds": len(results),
        "first_seed": seeds.start,
        "cumulative_saving": statistics.fmean(cum),
        "cumulative_saving_stdev": statistics.stdev(cum) if len(cum) > 1 else 0.0,
        "cumulative_saving_se": _se(cum),
        "last10_saving": statistics.fmean(r.last_saving(10) for r in results),
        "converged_batch_size": bs,
        "converged_power_limit": pl,
        "converged_seeds": count,
        "paper_policy_saving": statistics.fmean(p.cumulative_saving for p in paper),
        "vs_paper_policy": statistics.fmean(diff),
        "vs_paper_policy_se": _se(diff),
        "target": TARGET.get(workload) if gpu == "v100" else None,
        "seconds": seconds,
    }


def _at_least(row: dict) -> tuple[bool | None, bool]:
    """(saving >= target at the target's 0.1-point precision, mean paired difference >= 0)."""
    target = None
    if row["target"] is not None:
        target = round(row["cumulative_saving"], 3) >= row["target"]
    return target, row["vs_paper_policy"] >= 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--seeds", type=int, default=10, help="how many seeds (default 10)")
    ap.add_argument("--first-seed", type=int, default=1, help="the first seed (default 1)")
    ap.add_argument("--gpu", default="v100")
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--beta", type=float, default=2.0)
    ap.add_argument(
        "--accounting",
        choices=ACCOUNTING,
        default="epoch",
        help="charge runs by whole epochs, as the simulator behind the published figures "
        "(default), or step by step, as this package's optimizers run",
    )
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows = []
    if not args.json:
        print(
            f"{'workload':<14}{'N':>5}{'b0':>6}{'saving':>9}{'± se':>6}{'paper':>8}"
            f"{'vs paper':>15}{'target':>8}{'last 10':>9}{'converged':>21}{'seconds':>9}"
        )
    for w in WORKLOADS:
        row = bench(w, args.gpu, seeds, args.eta, args.beta, args.accounting)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        target = "-" if row["target"] is None else f"{row['target']:.1%}"
        conv = (
            f"{row['converged_batch_size']}@{row['converged_power_limit']:g}W "
            f"({row['converged_seeds']}/{row['seeds']})"
        )
        vs = f"{row['vs_paper_policy']:+.2%} ±{row['vs_paper_policy_se']:.2%}"
        print(
            f"{w:<14}{row['recurrences']:>5}{row['default_batch_size']:>6}"
            f"{row['cumulative_saving']:>9.2%}{row['cumulative_saving_se']:>6.1%}"
            f"{row['paper_policy_saving']:>8.2%}{vs:>15}{target:>8}"
            f"{row['last10_saving']:>9.1%}{conv:>21}{row['seconds']:>9.2f}",
            flush=True,
        )
    if not args.json:
        seconds = math.fsum(r["seconds"] for r in rows)
        met = [_at_least(r) for r in rows]
        targets = [t for t, _ in met if t is not None]
        print(
            f"optimizer: {seconds:.2f} s for {len(WORKLOADS)} workloads x {len(seeds)} seeds "
            f"({seeds.start}..{seeds.stop - 1}, {args.accounting} accounting; budget "
            f"{TIME_BUDGET_S:g} s for 10 seeds)\n"
            f"at least the paper policy on the same runs: {sum(p for _, p in met)}/{len(met)}; "
            f"at least the published figure (to its 0.1 point): {sum(targets)}/{len(targets)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
