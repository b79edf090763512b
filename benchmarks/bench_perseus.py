"""Pipeline frequency planning: planning time, frontier size and energy saved.

Run: python benchmarks/bench_perseus.py [--gpu v100|a40] [--weights 1,1.2,0.9,1.1] [--json]

For (stages x microbatches) = 4x8, 4x16 and 8x32 it builds a synthetic instruction profile from
the simulated GPU's calibrated frequency model (zeus_nb.optimizer.pipeline_frequency.
synthetic_profile; stage sizes cycle through --weights, an illustrative imbalance), solves the whole
time-energy frontier with lowtime and reports: planning time (profile to frontier, wall clock and
this process's CPU time, which a busy shared machine inflates less), number of frontier points,
the energy saved against all-max clocks at the same iteration time (the fastest frontier point:
intrinsic energy bloat) and at a deadline of 1.1x that time (the least-energy plan that meets it,
as for a straggler 10 % slower), in %.
"""

from __future__ import annotations

import argparse
import json
import time

from zeus_nb.optimizer.pipeline_frequency import solve_frontier, synthetic_profile

SIZES = ((4, 8), (4, 16), (8, 32))


def run_case(gpu: str, stages: int, microbatches: int, pattern: list[float]) -> dict:
    weights = [pattern[s % len(pattern)] for s in range(stages)]
    t0, c0 = time.perf_counter(), time.process_time()
    profile = synthetic_profile(gpu, stages, weights)
    frontier = solve_frontier(profile, stages, microbatches)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    ref = frontier.max_clock
    fastest = frontier.fastest()
    slack = frontier.for_deadline(1.1 * fastest.iteration_time)
    return {
        "gpu": gpu,
        "stages": stages,
        "microbatches": microbatches,
        "weights": weights,
        "planning_s": round(elapsed, 3),
        "planning_cpu_s": round(cpu, 3),
        "frontier_points": len(frontier.points),
        "time_quantum_s": frontier.unit_time,
        "max_clock_time_s": ref.iteration_time,
        "max_clock_energy_j": ref.energy,
        "fastest_time_s": fastest.iteration_time,
        "saved_at_fastest_pct": round(100 * (1 - fastest.energy / ref.energy), 2),
        "deadline_1_1x_time_s": slack.iteration_time,
        "saved_at_1_1x_pct": round(100 * (1 - slack.energy / ref.energy), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="v100", help="v100 or a40 (default v100)")
    parser.add_argument("--weights", default="1,1.2,0.9,1.1", help="stage size pattern")
    parser.add_argument("--sizes", default=None, help="e.g. 4x8,4x16 (default 4x8,4x16,8x32)")
    parser.add_argument("--json", action="store_true", help="one JSON line per case")
    args = parser.parse_args(argv)
    pattern = [float(w) for w in args.weights.split(",")]
    sizes = (
        SIZES
        if args.sizes is None
        else [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    )
    for stages, mbs in sizes:
        r = run_case(args.gpu, stages, mbs, pattern)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(
                f"{args.gpu} {stages}x{mbs}: planned in {r['planning_s']:.2f} s "
                f"({r['planning_cpu_s']:.2f} s CPU), "
                f"{r['frontier_points']} frontier points; energy saved "
                f"{r['saved_at_fastest_pct']:.2f} % at the fastest time "
                f"({r['fastest_time_s']:.4g} s vs {r['max_clock_time_s']:.4g} s all-max), "
                f"{r['saved_at_1_1x_pct']:.2f} % at a 1.1x deadline",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
