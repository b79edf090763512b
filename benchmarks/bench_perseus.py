"""Pipeline frequency planning: both frontier solvers side by side, and the energy saved.

Run: python benchmarks/bench_perseus.py [--gpu v100|a40] [--weights 1,1.2,0.9,1.1]
         [--sizes 4x8,4x16,8x32] [--solvers native,lowtime] [--repeat 3] [--json]

For (stages x microbatches) = 4x8, 4x16 and 8x32 it builds a synthetic instruction profile from
the simulated GPU's calibrated frequency model (zeus_nb.optimizer.pipeline_frequency.
synthetic_profile; stage sizes cycle through --weights, an illustrative imbalance) and solves the
whole time-energy frontier with each solver in this one process: this package's own ("native",
the default) and the lowtime package's ("lowtime", the reference). Per size it reports each
solver's planning time (solve_frontier, profile to frontier, after one tiny warm-up solve per
solver so that no timing includes imports: wall clock and this process's CPU time, which a busy
shared machine inflates less; the best of up to --repeat runs, the two solvers' runs alternating,
one run only where a run takes over 10 s), the ratio lowtime / native of both, the largest
relative energy difference between the two frontiers at matched iteration times
(zeus_nb.optimizer.pipeline_frequency.frontier_gap), the number of frontier points, and, from the
native frontier, the energy saved against all-max clocks at the same iteration time (the fastest
frontier point: intrinsic energy bloat) and at a deadline of 1.1x that time (the least-energy plan
that meets it, as for a straggler 10 % slower), in %.
"""

from __future__ import annotations

import argparse
import json
import time

from zeus_nb.optimizer.pipeline_frequency import (
    dependencies,
    frontier_gap,
    solve_frontier,
    synthetic_profile,
)

SIZES = ((4, 8), (4, 16), (8, 32))
SOLVERS = ("native", "lowtime")
ONCE_ABOVE_S = 10.0


def warm_up(gpu: str, solvers=SOLVERS) -> None:
    """One tiny solve per solver first, so that no timing includes imports."""
    profile = synthetic_profile(gpu, 2, [1.0, 1.5])
    for name in solvers:
        solve_frontier(profile, 2, 2, solver=name)


def _timed_solve(profile, stages: int, microbatches: int, solver: str):
    t0, c0 = time.perf_counter(), time.process_time()
    frontier = solve_frontier(profile, stages, microbatches, solver=solver)
    return frontier, time.perf_counter() - t0, time.process_time() - c0


def best_of(profile, stages: int, microbatches: int, solvers, repeat: int) -> dict:
    """Per solver: its frontier and shortest wall and CPU time over up to ``repeat`` runs.

    The solvers' runs alternate, so that a change in the machine's load hits both; a solver
    whose first run took over ``ONCE_ABOVE_S`` runs once.
    """
    best: dict = {}
    for r in range(repeat):
        for name in solvers:
            if r and best[name][1] > ONCE_ABOVE_S:
                continue
            frontier, wall, cpu = _timed_solve(profile, stages, microbatches, name)
            old = best.get(name, (frontier, wall, cpu))
            best[name] = (frontier, min(wall, old[1]), min(cpu, old[2]))
    return best


def run_case(
    gpu: str,
    stages: int,
    microbatches: int,
    pattern: list[float],
    solvers=SOLVERS,
    repeat: int = 3,
) -> dict:
    weights = [pattern[s % len(pattern)] for s in range(stages)]
    profile = synthetic_profile(gpu, stages, weights)
    dependencies(stages, microbatches)  # the DAG both solvers share, cached
    solved = best_of(profile, stages, microbatches, solvers, repeat)
    frontier, elapsed, cpu = solved[solvers[0]]
    ref = frontier.max_clock
    fastest = frontier.fastest()
    slack = frontier.for_deadline(1.1 * fastest.iteration_time)
    result = {
        "gpu": gpu,
        "stages": stages,
        "microbatches": microbatches,
        "weights": weights,
        "solver": solvers[0],
        "repeat": repeat,
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
    for name in solvers[1:]:
        other, other_s, other_cpu = solved[name]
        result.update(
            {
                f"{name}_planning_s": round(other_s, 3),
                f"{name}_planning_cpu_s": round(other_cpu, 3),
                f"{name}_frontier_points": len(other.points),
                f"{name}_over_{solvers[0]}_wall": round(other_s / elapsed, 2),
                f"{name}_over_{solvers[0]}_cpu": round(other_cpu / cpu, 2),
                f"{name}_max_energy_diff_pct": round(100 * frontier_gap(frontier, other), 4),
            }
        )
    return result


def _line(r: dict, solvers) -> str:
    first = solvers[0]
    text = (
        f"{r['gpu']} {r['stages']}x{r['microbatches']}: {first} planned in "
        f"{r['planning_s']:.2f} s ({r['planning_cpu_s']:.2f} s CPU)"
    )
    for name in solvers[1:]:
        text += (
            f"; {name} {r[f'{name}_planning_s']:.2f} s ({r[f'{name}_planning_cpu_s']:.2f} s CPU)"
            f" = {r[f'{name}_over_{first}_wall']:.1f}x wall, "
            f"{r[f'{name}_over_{first}_cpu']:.1f}x CPU; frontiers differ by at most "
            f"{r[f'{name}_max_energy_diff_pct']:.4f} % energy at matched times "
            f"({r['frontier_points']} vs {r[f'{name}_frontier_points']} points)"
        )
    return text + (
        f"; {r['frontier_points']} frontier points; energy saved "
        f"{r['saved_at_fastest_pct']:.2f} % at the fastest time "
        f"({r['fastest_time_s']:.4g} s vs {r['max_clock_time_s']:.4g} s all-max), "
        f"{r['saved_at_1_1x_pct']:.2f} % at a 1.1x deadline"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="v100", help="v100 or a40 (default v100)")
    parser.add_argument("--weights", default="1,1.2,0.9,1.1", help="stage size pattern")
    parser.add_argument("--sizes", default=None, help="e.g. 4x8,4x16 (default 4x8,4x16,8x32)")
    parser.add_argument(
        "--solvers",
        default=",".join(SOLVERS),
        help="solvers to run, the first one reported in full (default native,lowtime)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help=f"best of this many runs per solver (default 3; once above {ONCE_ABOVE_S:g} s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per case")
    args = parser.parse_args(argv)
    pattern = [float(w) for w in args.weights.split(",")]
    solvers = tuple(args.solvers.split(","))
    sizes = (
        SIZES
        if args.sizes is None
        else [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    )
    warm_up(args.gpu, solvers)
    for stages, mbs in sizes:
        r = run_case(args.gpu, stages, mbs, pattern, solvers, args.repeat)
        print(json.dumps(r) if args.json else _line(r, solvers), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
