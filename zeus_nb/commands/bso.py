"""zeus-nb bso: simulate the batch-size optimizer on the traces, inspect a job's saved state, or
serve Zeus's batch-size optimizer server."""

from __future__ import annotations

import json
import math

from zeus_nb.errors import InputError
from zeus_nb.inputs.args import ArgType, count, nonempty, real
from zeus_nb.optimizer.batch_size import (
    BatchSizeOptimizer,
    LocalBatchSizeOptimizer,
    PaperBatchSizeOptimizer,
)
from zeus_nb.optimizer.batch_size.simulator import MAX_RECURRENCES, simulate
from zeus_nb.optimizer.batch_size.store import StoreError, StoreNotFoundError
from zeus_nb.optimizer.batch_size.store_url import describe, open_store


def _beta(text: str) -> float:
    """Early-stopping knob: a number > 1, or inf (never stop early)."""
    if text.strip().lower() in ("inf", "infinity"):
        return math.inf
    value = real(low=1.0)(text)
    if value <= 1.0:
        raise InputError(f"the value: {text!r} is out of range; expected > 1, or inf")
    return value


BETA = ArgType("beta", _beta, ("", "nan", "1", "0.5", "-inf", "abc"))


def register(sub) -> None:
    p = sub.add_parser("bso", help="batch-size optimizer for recurring jobs")
    bso_sub = p.add_subparsers(dest="bso_command", required=True, metavar="ACTION")

    s = bso_sub.add_parser("simulate", help="replay recurrences of a traced workload")
    s.add_argument(
        "--workload", type=nonempty("name"), required=True, help="traced workload (dataset name)"
    )
    s.add_argument(
        "--gpu", type=nonempty("name"), default="v100", help="power trace: v100, a40 or a CSV"
    )
    s.add_argument(
        "--eta", type=real(low=0.0, high=1.0), default=0.5, help="energy-time knob in [0, 1]"
    )
    s.add_argument("--beta", type=BETA, default=2.0, help="early-stopping knob > 1 (inf: off)")
    s.add_argument("--seed", type=count(0, 2**32 - 1), default=1)
    s.add_argument(
        "--recurrences",
        type=count(1, MAX_RECURRENCES),
        default=None,
        help=f"default: 2 x |batch sizes| x |limits|; at most {MAX_RECURRENCES} (about 1 ms each)",
    )
    s.add_argument(
        "--accounting",
        choices=("step", "epoch"),
        default="step",
        help="charge profiling and stopping by step (default) or by whole epochs, as the "
        "original Zeus simulator does",
    )
    s.add_argument(
        "--policy",
        choices=("zeus-nb", "paper"),
        default="zeus-nb",
        help="the optimizer that decides: this package's (default) or the published policy",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=run_simulate)

    show = bso_sub.add_parser("show", help="print a recurring job's saved bandit state")
    show.add_argument("job", nargs="?", type=nonempty("name"), help="job (omit to list the jobs)")
    show.add_argument(
        "--store",
        type=nonempty("location"),
        default=None,
        help="the state store: a SQLite file, sqlite:///PATH or postgresql://USER@HOST/DB "
        "(default: $ZEUS_NB_BSO_STORE, else the SQLite file in the user cache)",
    )
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=run_show)

    serve = bso_sub.add_parser(
        "serve", help="run Zeus's batch-size optimizer server (needs the server extra)"
    )
    serve.add_argument(
        "--host",
        type=nonempty("address"),
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    serve.add_argument("--port", type=count(1, 65535), default=8000, help="default 8000")
    serve.add_argument(
        "--database-url",
        type=nonempty("URL"),
        default=None,
        help="where jobs are kept: sqlite:///PATH, a path or postgresql://USER@HOST/DB "
        "(default: $ZEUS_BSO_DATABASE_URL, else the default store file)",
    )
    serve.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error", "critical"),
        default=None,
        help="default: $ZEUS_BSO_LOG_LEVEL, else info",
    )
    serve.add_argument("--echo-sql", action="store_true", help="log every SQL statement")
    serve.set_defaults(func=run_serve)


def run_serve(args) -> int:
    from zeus_nb.optimizer.batch_size.server.serve import serve

    serve(
        host=args.host,
        port=args.port,
        database_url=args.database_url,
        log_level=args.log_level,
        echo_sql=True if args.echo_sql else None,
    )
    return 0


def _num(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def run_simulate(args) -> int:
    policy = PaperBatchSizeOptimizer if args.policy == "paper" else LocalBatchSizeOptimizer
    result = simulate(
        args.workload,
        args.gpu,
        eta=args.eta,
        beta=args.beta,
        seed=args.seed,
        recurrences=args.recurrences,
        accounting=args.accounting,
        optimizer=policy,
    )
    summary = result.summary()
    rec = result.per_recurrence()
    if args.json:
        summary["beta"] = _num(summary["beta"])
        summary["default_batch_size"] = result.model.default_batch_size
        summary["policy"] = args.policy
        summary["accounting"] = args.accounting
        summary["baseline_energy"] = result.baseline_energy
        out = {
            "summary": summary,
            "recurrences": rec.to_dict(orient="records"),
            "runs": result.history.to_dict(orient="records"),
        }
        print(json.dumps(out, default=_json_default))
        return 0
    m = result.model
    print(
        f"{m.workload} on {m.gpu}: batch sizes {m.batch_sizes} (b0 {m.default_batch_size}), "
        f"power limits {[int(p) for p in m.power_limits]} W, eta {m.eta:g}, beta "
        f"{result.beta:g}, seed {result.seed}, {result.recurrences} recurrences; "
        f"{args.policy} policy, charged by {args.accounting}"
    )
    print(
        f"{'rec':>4} {'bs':>6} {'limit':>6} {'runs':>4} {'time (s)':>11} {'energy (J)':>12} "
        f"{'cost (J)':>12}"
    )
    for r in rec.itertuples():
        print(
            f"{r.recurrence:>4} {r.batch_size:>6} {r.power_limit:>6.0f} {r.attempts:>4} "
            f"{r.time:>11.0f} {r.energy:>12.4g} {r.cost:>12.4g}"
            + ("" if r.reached else "  (never reached)")
        )
    h = result.history
    print(
        f"runs: {len(h)} ({int((~h['reached']).sum())} failed, "
        f"{int(h['stopped_early'].sum())} stopped early)"
    )
    print(
        f"energy saving vs b0 at the highest limit: cumulative "
        f"{summary['cumulative_saving']:.1%}, last 10 recurrences {summary['last10_saving']:.1%}"
    )
    print(
        f"converged to batch size {summary['converged_batch_size']} at "
        f"{summary['converged_power_limit']:g} W"
    )
    return 0


def _json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"cannot serialize {type(o).__name__}")


def run_show(args) -> int:
    try:
        store = open_store(args.store, create=False)  # reading never creates a store
    except StoreNotFoundError as e:
        if args.job is not None:
            raise
        where = str(e).removeprefix("no batch-size optimizer state at ")
        print(json.dumps({"store": where, "jobs": []}) if args.json else f"{where}: no jobs")
        return 0
    where = describe(store)
    if args.job is None:
        names = store.jobs()
        if args.json:
            print(json.dumps({"store": where, "jobs": names}))
        else:
            print(f"{where}: {len(names)} job(s)")
            for n in names:
                print(f"  {n}")
        return 0
    if store.job(args.job) is None:
        raise StoreError(f"no job {args.job!r} in {where}; `zeus-nb bso show` lists them")
    bso = BatchSizeOptimizer(args.job, store)
    post = bso.posterior()
    limits = store.power_limits(args.job)
    if args.json:
        print(
            json.dumps(
                {
                    "job": args.job,
                    "phase": bso.phase,
                    "observations": bso.num_observations,
                    "best_cost": _num(bso.best_cost),
                    "next_batch_size": bso.next_batch_size(),
                    "power_limits": {str(k): v for k, v in limits.items()},
                    "arms": [
                        {k: _num(v) for k, v in row.items()}
                        for row in post.to_dict(orient="records")
                    ],
                },
                default=_json_default,
            )
        )
        return 0
    print(
        f"{args.job}: {bso.num_observations} runs, phase {bso.phase}, "
        f"next batch size {bso.next_batch_size()}"
    )
    print(f"{'bs':>6} {'runs':>5} {'reached':>7} {'mean cost (J)':>14} {'std':>10} {'limit':>6}")
    for r in post.itertuples():
        limit = limits.get(r.batch_size)
        print(
            f"{r.batch_size:>6} {r.observations:>5} {r.reached:>7} {r.mean_cost:>14.4g} "
            f"{r.std:>10.3g} {'-' if limit is None else f'{limit:g}':>6}"
            + ("" if r.survivor else "  pruned")
        )
    return 0
