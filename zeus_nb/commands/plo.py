"""zeus-nb plo replay LOG.csv"""

from __future__ import annotations

from zeus_nb.device.replay import load_profile_log
from zeus_nb.inputs.args import count, nonempty, only_with, real
from zeus_nb.optimizer.power_limit import registry
from zeus_nb.optimizer.replay import replay_optimizer

CLI_SELECTORS = tuple(spec.cli_name for spec in registry.SELECTORS.values())


def _with_knob(knob: str) -> tuple[str, ...]:
    """The command-line names of the selectors tuned by ``knob``."""
    return tuple(
        s.cli_name
        for s in registry.SELECTORS.values()
        if s.knob is not None and s.knob.name == knob
    )


def register(sub) -> None:
    p = sub.add_parser("plo", help="power-limit optimizer tools")
    psub = p.add_subparsers(dest="plo_command", required=True, metavar="ACTION")
    r = psub.add_parser(
        "replay",
        help="run the power-limit optimizer on a ZeusMonitor profiling log",
        description="Replay a ZeusMonitor CSV log (one __GlobalPowerLimitOptimizer_<W> window "
        "per power limit) through the optimizer; print each limit and the chosen one.",
    )
    r.add_argument("log", type=nonempty("path"), help="ZeusMonitor CSV log of a profiling run")
    r.add_argument("--selector", choices=CLI_SELECTORS, default="zeus-cost")
    r.add_argument(
        "--eta", type=real(low=0.0, high=1.0), help="zeus-cost energy-time knob in [0, 1] (0.5)"
    )
    r.add_argument("--factor", type=real(low=1.0), help="max-slowdown factor, >= 1 (1.1)")
    r.add_argument("--adaptive", action="store_true", help="skip limits that cannot win")
    r.add_argument("--pl-step", type=count(1, 2000), default=25, help="W between profiled limits")
    r.add_argument(
        "--run",
        type=count(1),
        default=None,
        help="which run of a log that holds several (a header line starts each: a monitor that "
        "opens the log, a profiling run that starts again); default: the last run the optimizer "
        "finished, else the only profiling run",
    )
    r.add_argument("--json", action="store_true", help="print one JSON object")
    for option, knob, default in (("--eta", "eta_knob", 0.5), ("--factor", "factor", 1.1)):
        names = _with_knob(knob)
        only_with(
            r,
            option,
            lambda ns, names=names: ns.selector in names,
            f"with --selector {' or '.join(names)}",
            default,
        )
    r.set_defaults(func=run_replay)


def make_selector(name: str, eta: float, factor: float):
    """The selector ``name`` (a command-line name) with ``--eta`` or ``--factor`` as its knob."""
    knob = registry.spec_for(name)[1].knob
    value = None if knob is None else {"eta_knob": eta, "factor": factor}[knob.name]
    return registry.make_selector(name, value)


def run_replay(args) -> int:
    import json

    selector = make_selector(args.selector, args.eta, args.factor)
    log = load_profile_log(args.log, run=args.run)
    plo = replay_optimizer(log, selector, adaptive=args.adaptive, pl_step=args.pl_step)
    measured = {m.power_limit: m for m in plo.measurements}
    rows = []
    for w in plo.power_limits:
        m = measured.get(w)
        rows.append(
            {
                "power_limit": w,
                "time": m.time if m else None,
                "energy": m.energy if m else None,
                "status": "measured" if m else "skipped: " + plo.abandoned.get(w, ""),
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "log": str(args.log),
                    "run": log.run,
                    "ignored_runs": log.ignored,
                    "runs_note": log.note,
                    "selector": repr(selector),
                    "adaptive": args.adaptive,
                    "power_limit": plo.optimal_power_limit,
                    "profiling_time": plo.profiling_time,
                    "profiling_energy": plo.profiling_energy,
                    "limits": rows,
                },
                allow_nan=False,  # strict JSON: a NaN here would be a bug, never output
            )
        )
        return 0
    if log.ignored or log.run > 1:  # which run of several, and which were ignored
        print(log.note)
    print(f"{'limit W':>8} {'time s':>9} {'energy J':>10} {'power W':>8}")
    for r in rows:
        mark = "  <- chosen" if r["power_limit"] == plo.optimal_power_limit else ""
        if r["time"] is None:
            print(f"{r['power_limit']:>8g} {'':>9} {'':>10} {'':>8}  {r['status']}")
            continue
        power = r["energy"] / r["time"] if r["time"] > 0 else 0.0
        print(f"{r['power_limit']:>8g} {r['time']:>9.2f} {r['energy']:>10.1f} {power:>8.1f}{mark}")
    print(f"selector: {selector!r}")
    print(f"chosen power limit: {plo.optimal_power_limit:g} W")
    print(
        f"profiling spent {plo.profiling_time:.1f} s and {plo.profiling_energy:.0f} J "
        "(warm-up steps included)"
    )
    return 0
