"""zeus-nb perseus: plan per-instruction SM clocks for pipeline-parallel training."""

from __future__ import annotations

import json

from zeus_nb.errors import InputError
from zeus_nb.inputs.args import ArgType, count, nonempty, seconds
from zeus_nb.inputs.validate import Quantity, number
from zeus_nb.utils.files import writes_itself


def _weights(text: str) -> list[float]:
    """Relative stage sizes: finite numbers > 0 (NaN once made a profile of NaN times)."""
    parts = [w for w in text.split(",") if w.strip()]
    if not parts:
        raise InputError("the value: no numbers; give e.g. 1,1.3,1,0.8")
    size = Quantity("relative stage size", "", 0.0, 1e3, open_low=True)
    return [number(w, f"the value: item {i + 1}", size) for i, w in enumerate(parts)]


WEIGHTS = ArgType("weights", _weights, ("", "nan,1", "inf,1", "-1,1", "0,1", "1,abc", ","))


def register(sub) -> None:
    p = sub.add_parser(
        "perseus",
        help="pipeline frequency planning: the time-energy frontier of a 1F1B iteration",
        description="Plan the SM clock of every forward and backward of a pipeline-parallel "
        "iteration from an instruction profile (see docs/pipeline_frequency.md).",
    )
    psub = p.add_subparsers(dest="perseus_command", required=True, metavar="ACTION")

    plan = psub.add_parser("plan", help="print the frontier, or the plan for a deadline")
    plan.add_argument("profile", type=nonempty("path"), help="instruction profile CSV")
    plan.add_argument("--stages", type=count(1, 10**4), required=True, help="pipeline stages S")
    plan.add_argument("--microbatches", type=count(1, 10**6), required=True, help="microbatches")
    plan.add_argument(
        "--deadline",
        type=seconds,
        default=None,
        help="iteration time in s to meet: print the least-energy plan that does",
    )
    plan.add_argument(
        "--unit-time",
        type=seconds,
        default=None,
        help="solver time quantum in s (default: 1/25 of the shortest instruction)",
    )
    plan.add_argument(
        "--solver",
        choices=("native", "lowtime"),
        default="native",
        help="frontier solver: this package's own (native, default) or the lowtime package's "
        "(the reference, much slower)",
    )
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(func=run_plan)

    syn = psub.add_parser(
        "synthetic", help="write an instruction profile made from the simulated GPU's model"
    )
    syn.add_argument("output", type=nonempty("path"), help="CSV file to write")
    syn.add_argument("--gpu", type=nonempty("name"), default="a40", help="a40 or v100 (a40)")
    syn.add_argument("--stages", type=count(1, 10**4), default=4)
    syn.add_argument(
        "--weights",
        type=WEIGHTS,
        default=None,
        help="relative stage sizes, e.g. 1,1.3,1,0.8 (default equal)",
    )
    syn.add_argument(
        "--workload", type=nonempty("name"), default="squad", help="traced workload (squad)"
    )
    syn.set_defaults(func=run_synthetic)


def run_plan(args) -> int:
    from zeus_nb.optimizer.pipeline_frequency import load_profile, solve_frontier

    profile = load_profile(args.profile)
    frontier = solve_frontier(
        profile, args.stages, args.microbatches, args.unit_time, solver=args.solver
    )
    ref = frontier.max_clock
    if args.deadline is not None:
        point = frontier.for_deadline(args.deadline)
        if args.json:
            print(json.dumps(point.to_json()))
            return 0
        print(
            f"deadline {args.deadline:g} s: iteration {point.iteration_time:.6g} s, "
            f"{point.energy:.6g} J ({_saved(point.energy, ref.energy)} less than all max "
            f"clocks: {ref.iteration_time:.6g} s, {ref.energy:.6g} J)"
        )
        for s in range(point.plan.num_stages):
            freqs = " ".join(f"{i[0].upper()}{j}@{f}" for i, j, f in point.plan.stages[s])
            print(f"stage {s}: {freqs}")
        return 0
    if args.json:
        print(json.dumps(frontier.to_json()))
        return 0
    print(
        f"all max clocks: {ref.iteration_time:.6g} s, {ref.energy:.6g} J; "
        f"{len(frontier.points)} frontier point(s), time quantum {frontier.unit_time:.3g} s"
    )
    print(f"{'#':>4} {'time (s)':>12} {'energy (J)':>12} {'saved':>7}")
    for k, pt in enumerate(frontier.points):
        saved = _saved(pt.energy, ref.energy)
        print(f"{k:>4} {pt.iteration_time:>12.6g} {pt.energy:>12.6g} {saved:>7}")
    return 0


def _saved(energy: float, reference: float) -> str:
    return f"{100 * (1 - energy / reference):.2f}%"


@writes_itself("InstructionProfile.to_csv (atomic_write)")
def run_synthetic(args) -> int:
    from zeus_nb.optimizer.pipeline_frequency import synthetic_profile

    weights = args.weights  # checked by WEIGHTS: finite, > 0
    profile = synthetic_profile(args.gpu, args.stages, weights, args.workload)
    path = profile.to_csv(args.output)
    print(f"wrote {path} ({args.stages} stages, {args.gpu})")
    return 0
