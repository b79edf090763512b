"""zeus-nb tradeoff: potential savings and Pareto fronts from power and train traces."""

from __future__ import annotations

import json
import sys

from zeus_nb.data.traces import WORKLOADS, get_workload, load_power_trace, load_train_trace, tta_eta
from zeus_nb.inputs.args import nonempty
from zeus_nb.tradeoff import pareto_front, potential_savings


def register(sub) -> None:
    p = sub.add_parser("tradeoff", help="energy-time tradeoff of traced workloads")
    tsub = p.add_subparsers(dest="tradeoff_command", required=True, metavar="ACTION")

    s = tsub.add_parser(
        "savings",
        help="energy saved by the best batch size, power limit, or both, over the defaults",
    )
    _common(s)
    s.set_defaults(func=run_savings)

    f = tsub.add_parser("pareto", help="Pareto front of (time, energy) to reach the target")
    f.add_argument(
        "--workload",
        type=nonempty("name"),
        required=True,
        help="dataset name, e.g. imagenet or librispeech",
    )
    _common(f)
    f.set_defaults(func=run_pareto)


def _common(p) -> None:
    p.add_argument(
        "--gpu",
        type=nonempty("name"),
        default="v100",
        help="v100, a40, or a power-trace CSV (default v100)",
    )
    p.add_argument(
        "--train-trace",
        type=nonempty("path"),
        default=None,
        help="train-trace CSV (default: bundled)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _train(args):
    return None if args.train_trace is None else load_train_trace(args.train_trace)


def run_savings(args) -> int:
    power = load_power_trace(args.gpu)
    table = potential_savings(power, train_trace=_train(args))
    unknown = sorted(set(power["dataset"]) - set(WORKLOADS))
    if unknown:  # a row missing without a word reads as "no saving"
        print(
            f"note: no row for {', '.join(unknown)}: not a known workload "
            f"(known: {', '.join(WORKLOADS)})",
            file=sys.stderr,
        )
    if args.json:
        return _print_json(
            table,
            workload=str,
            best_batch_size_ratio=float,
            best_power_limit_ratio=float,
            best_both_ratio=float,
            optimal_batch_size=int,
            optimal_power_limit=float,
        )
    print(f"ETA relative to the default batch size b0 at the highest power limit ({args.gpu})")
    head = f"{'workload':<14}{'b0':>6}{'best bs':>9}{'best PL':>9}{'both':>8}  optimum"
    print(head)
    print("-" * len(head))
    for r in table.itertuples():
        print(
            f"{r.workload:<14}{r.default_batch_size:>6}{r.best_batch_size_ratio:>9.3f}"
            f"{r.best_power_limit_ratio:>9.3f}{r.best_both_ratio:>8.3f}  "
            f"({r.optimal_batch_size}, {r.optimal_power_limit:g} W)"
        )
    return 0


def _print_json(frame, **columns) -> int:
    """Print ``frame``'s rows as a JSON list, each named column cast to plain Python."""
    out = [{c: cast(getattr(r, c)) for c, cast in columns.items()} for r in frame.itertuples()]
    print(json.dumps(out, indent=2))
    return 0


def run_pareto(args) -> int:
    wl = get_workload(args.workload)
    front = pareto_front(tta_eta(wl.dataset, args.gpu, train_trace=_train(args)))
    if args.json:
        return _print_json(front, batch_size=int, power_limit=float, tta=float, eta=float)
    print(f"Pareto front of {wl.dataset}/{wl.network} on {args.gpu}, fastest first")
    head = f"{'batch size':>10}{'limit (W)':>11}{'TTA (h)':>10}{'ETA (MJ)':>10}"
    print(head)
    print("-" * len(head))
    for r in front.itertuples():
        print(f"{r.batch_size:>10}{r.power_limit:>11g}{r.tta / 3600:>10.2f}{r.eta / 1e6:>10.3f}")
    return 0
