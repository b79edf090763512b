"""Benchmark the batch-size optimizer on the six V100 workloads of the Zeus traces.

Per workload: eta 0.5, beta 2, N = 2 x |batch sizes| x |power limits| recurrences, seeds 1..10.
Prints the mean cumulative energy saving (every run counted, failed and early-stopped ones
included) against N runs of the default batch size at the highest power limit, the same saving
over the last 10 recurrences, the configuration most seeds converged to, and the seconds taken.
``TARGET`` holds the cumulative savings that the original Zeus trace-driven simulator reaches on
the same traces and knobs.

    python benchmarks/bench_bso.py [--json] [--seeds 10] [--first-seed 1] [--gpu v100]
                                   [--accounting step|epoch]

``--first-seed 11 --seeds 300`` reruns it on the held-out seeds 11..310 on which the optimizer's
knobs were chosen. The ``± se`` column is one standard error of the mean over the seeds.
``--accounting epoch`` charges runs by whole epochs, as the simulator behind ``TARGET`` does
(see ``zeus_nb.optimizer.batch_size_sim``); the default charges them step by step.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter

from zeus_nb.optimizer.batch_size_sim import simulate, workload_model

WORKLOADS = ("librispeech", "squad", "sentiment140", "imagenet", "cifar100", "movielens-1m")
TARGET = {
    "librispeech": 0.354,
    "squad": 0.177,
    "sentiment140": 0.192,
    "imagenet": 0.146,
    "cifar100": 0.716,
    "movielens-1m": 0.625,
}
TIME_BUDGET_S = 10.0  # for the six workloads x 10 seeds


def bench(
    workload: str, gpu: str, seeds: range, eta: float, beta: float, accounting: str = "step"
) -> dict:
    start = time.perf_counter()
    model = workload_model(workload, gpu, eta)
    results = [simulate(model, beta=beta, seed=s, accounting=accounting) for s in seeds]
    seconds = time.perf_counter() - start
    configs = Counter(r.converged for r in results)
    (bs, pl), count = configs.most_common(1)[0]
    cum = [r.cumulative_saving for r in results]
    return {
        "workload": workload,
        "gpu": gpu,
        "accounting": accounting,
        "recurrences": results[0].recurrences,
        "default_batch_size": model.default_batch_size,
        "seeds": len(results),
        "cumulative_saving": statistics.fmean(cum),
        "cumulative_saving_stdev": statistics.stdev(cum) if len(cum) > 1 else 0.0,
        "last10_saving": statistics.fmean(r.last_saving(10) for r in results),
        "converged_batch_size": bs,
        "converged_power_limit": pl,
        "converged_seeds": count,
        "target": TARGET.get(workload) if gpu == "v100" else None,
        "seconds": seconds,
    }


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
        choices=("step", "epoch"),
        default="step",
        help="charge runs by step (default) or by whole epochs, as the original Zeus simulator",
    )
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    total = time.perf_counter()
    rows = []
    if not args.json:
        print(
            f"{'workload':<14}{'N':>5}{'b0':>6}{'cumulative':>12}{'± se':>6}{'target':>8}"
            f"{'last 10':>9}{'converged':>21}{'seconds':>9}"
        )
    for w in WORKLOADS:
        row = bench(w, args.gpu, seeds, args.eta, args.beta, args.accounting)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        target = "-" if row["target"] is None else f"{row['target']:.1%}"
        se = row["cumulative_saving_stdev"] / math.sqrt(row["seeds"])
        conv = (
            f"{row['converged_batch_size']}@{row['converged_power_limit']:g}W "
            f"({row['converged_seeds']}/{row['seeds']})"
        )
        print(
            f"{w:<14}{row['recurrences']:>5}{row['default_batch_size']:>6}"
            f"{row['cumulative_saving']:>12.1%}{se:>6.1%}{target:>8}{row['last10_saving']:>9.1%}"
            f"{conv:>21}{row['seconds']:>9.2f}",
            flush=True,
        )
    total = time.perf_counter() - total
    met = [r["target"] is None or r["cumulative_saving"] >= r["target"] for r in rows]
    if not args.json:
        print(
            f"total {total:.2f} s for {len(WORKLOADS)} workloads x {len(seeds)} seeds "
            f"({seeds.start}..{seeds.stop - 1}, {args.accounting} accounting; "
            f"budget {TIME_BUDGET_S:g} s for 10 seeds); "
            f"saving at least the target on {sum(met)}/{len(met)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
