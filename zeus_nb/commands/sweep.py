"""zeus-nb sweep"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from zeus_nb.errors import InputError
from zeus_nb.inputs import read_text
from zeus_nb.inputs.args import ArgType, count, nonempty, only_with, scheduler_address, seconds
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.validate import writable_dir
from zeus_nb.runner.execute import TIMEOUT_HELP
from zeus_nb.runner.notebooks import (
    declared_type,
    find_notebook,
    grid_points,
    list_parameter,
    merge_parameters,
    notebook_parameters,
    parse_values,
    point_file,
    run_notebook,
    same_point,
)
from zeus_nb.runner.points import sweep_notebook_on_cluster
from zeus_nb.runner.records import collect
from zeus_nb.utils.files import atomic_write, writes_itself


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="execute a notebook over a parameter grid with papermill and collect the results",
        description=(
            "Execute NOTEBOOK once per point of the grid given by -p options, one output notebook "
            "per point named by its parameters. Points whose output already finished are skipped, "
            "so an interrupted sweep resumes where it stopped; a failing point is reported and the "
            "sweep goes on. The recorded results of all points are written to results.csv."
        ),
    )
    p.add_argument(
        "notebook",
        type=nonempty("notebook"),
        help="notebook path, or a shipped notebook's number or name",
    )
    p.add_argument(
        "-p",
        "--param",
        nargs=2,
        type=nonempty("text"),
        action="append",
        default=[],
        metavar=("NAME", "VALUES"),
        help=(
            "a parameter and its comma-separated values, e.g. -p batch_size 64,128,256; a "
            "parameter that holds a list takes one list per point: -p live_batch_sizes 32,128 "
            "is one point, [32,128],[512] two"
        ),
    )
    p.add_argument(
        "-o", "--output-dir", type=nonempty("path"), default=None, help="runs/<notebook name>"
    )
    p.add_argument("--smoke", action="store_true", help="pass smoke=True (small, fast runs)")
    p.add_argument("--force", action="store_true", help="re-run points that already finished")
    p.add_argument("--timeout", type=seconds, default=None, help=TIMEOUT_HELP)
    p.add_argument(
        "--kernel", type=nonempty("name"), default="python3", help="Jupyter kernel (python3)"
    )
    add_cluster_arguments(p)
    p.set_defaults(func=run)


def _walltime(text: str) -> str:
    if not re.fullmatch(r"(\d+-)?\d{1,3}(:\d{2}){0,2}", text.strip()):
        raise InputError(f"the value: {text!r} is not a Slurm time; give HH:MM:SS or D-HH:MM:SS")
    return text.strip()


def _memory(text: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", text.strip(), re.IGNORECASE):
        raise InputError(f"the value: {text!r} is not a memory size; give e.g. 16GB")
    return text.strip()


WALLTIME = ArgType("walltime", _walltime, ("", "1 hour", "abc"))
MEMORY = ArgType("memory", _memory, ("", "16", "lots"))
SLURM_DEFAULTS = {
    "--queue": None,
    "--account": None,
    "--walltime": "01:00:00",
    "--gpus-per-job": 1,
    "--jobs": 1,
    "--job-memory": "16GB",
}


def add_cluster_arguments(p) -> None:
    """--workers / --scheduler / --cluster slurm and the Slurm job options (docs/cluster.md)."""
    g = p.add_argument_group(
        "parallel execution (Dask; one GPU per point; needs the cluster extra)"
    ).add_mutually_exclusive_group()
    g.add_argument("--workers", type=count(1, 1024), metavar="N", help="N local worker processes")
    g.add_argument(
        "--scheduler",
        type=scheduler_address,
        metavar="ADDRESS",
        help="an existing Dask scheduler (tcp://HOST:PORT)",
    )
    g.add_argument("--cluster", choices=("slurm",), help="start workers as Slurm jobs")
    s = p.add_argument_group("Slurm jobs (with --cluster slurm)")
    s.add_argument("--queue", type=nonempty("name"), help="partition (#SBATCH -p)")
    s.add_argument("--account", type=nonempty("name"), help="account to charge (#SBATCH -A)")
    s.add_argument("--walltime", type=WALLTIME, help="job time limit (default: 01:00:00)")
    s.add_argument("--gpus-per-job", type=count(1, 64), help="GPUs (and workers) per job (1)")
    s.add_argument("--jobs", type=count(1, 10**4), help="number of jobs (default: 1)")
    s.add_argument("--job-memory", type=MEMORY, help="memory per job (default: 16GB)")
    slurm = lambda ns: ns.cluster == "slurm"  # noqa: E731
    for option, default in SLURM_DEFAULTS.items():
        only_with(p, option, slurm, "with --cluster slurm", default)


def executor_from_args(args):
    """What the Dask options ask for (None: run here, one point after another).

    Checked before anything is written: ``--cluster slurm`` without Slurm's ``sbatch`` fails
    at once rather than waiting for workers that never come.
    """
    if args.workers is not None:
        return int(args.workers)
    if args.scheduler is not None:
        return args.scheduler
    if args.cluster == "slurm":
        from zeus_nb.runner.cluster import SlurmOptions, require_sbatch

        require_sbatch()
        return SlurmOptions(
            queue=args.queue,
            account=args.account,
            walltime=args.walltime,
            gpus_per_job=args.gpus_per_job,
            jobs=args.jobs,
            memory=args.job_memory,
        )
    return None


def build_grid(notebook: Path, pairs: list[list[str]]) -> dict[str, list]:
    """The grid from ``-p NAME VALUES`` pairs, typed and checked against the notebook's cell."""

    declared = notebook_parameters(notebook)
    grid: dict[str, list] = {}
    for name, text in pairs:
        if name not in declared:
            names = ", ".join(declared) or "none (it has no cell tagged 'parameters')"
            raise InputError(f"{notebook.name} has no parameter {name!r}; its parameters: {names}")
        if name in grid:
            raise InputError(f"parameter {name!r} given twice; list all its values in one -p")
        info = declared[name]
        grid[name] = parse_values(text, declared_type(info), name, listed=list_parameter(info))
    return grid


def run(args) -> int:
    notebook = find_notebook(args.notebook)
    grid = build_grid(notebook, args.param)
    merge_parameters(grid, {"--smoke": True} if args.smoke else {})  # -p smoke and --smoke
    points = grid_points(grid) if grid else [{}]
    executor = executor_from_args(args)  # validated before the output folder is made
    out_dir = writable_dir(args.output_dir or Path("runs") / notebook.stem, "-o")
    print(f"sweep {notebook.name}: {len(points)} point(s) -> {out_dir}/", flush=True)

    failed, skipped, outputs, todo = [], 0, [], []
    for i, point in enumerate(points, 1):
        params = dict(point)
        if args.smoke:
            params["smoke"] = True
        label = point_file(notebook, point, args.smoke)
        output = out_dir / f"{label}.ipynb"
        if output in outputs:  # a grid listing one value twice: one run, one row
            continue
        outputs.append(output)
        if not args.force and same_point(output, notebook, params):
            skipped += 1
            print(f"[{i}/{len(points)}] {label}: done already, skipped", flush=True)
            continue
        if executor is not None:
            todo.append((label, params, output))
            continue
        res = run_notebook(notebook, output, params, timeout=args.timeout, kernel_name=args.kernel)
        if res.ok:
            print(f"[{i}/{len(points)}] {label}: ok ({res.seconds:.1f} s)", flush=True)
        else:
            failed.append((label, res.error))
            print(f"[{i}/{len(points)}] {label}: FAILED: {res.error}", flush=True)
    if executor is not None and todo:
        failed = sweep_notebook_on_cluster(
            notebook,
            todo,
            executor,
            timeout=args.timeout,
            kernel=args.kernel,
            done_before=skipped,
            report=lambda line: print(line, flush=True),
        )

    csv, table = write_results(out_dir, [o for o in outputs if o.exists()])
    shown = table.drop(columns=["notebook"]).to_string(index=False, max_colwidth=40)
    print(shown)
    done = len(points) - len(failed)
    print(f"{done}/{len(points)} point(s) done ({skipped} skipped as finished); table: {csv}")
    if failed:
        print(f"{len(failed)} point(s) failed:", file=sys.stderr)
        for label, err in failed:
            print(f"  {label}: {err}", file=sys.stderr)
        return 1
    return 0


@not_input(
    "results.csv zeus-nb wrote; an unreadable one is kept aside as "
    "results.csv.damaged, never parsed into numbers"
)
@writes_itself("moves a damaged results.csv aside: one rename")
def write_results(out_dir: Path, outputs: list[Path]):
    """Write ``results.csv``: this sweep's rows, plus rows other sweeps wrote there before.

    Under a file lock and through a temporary file, so two sweeps into one folder never leave
    a duplicate or a torn row. Returns (path, this sweep's table).
    """
    import io
    import logging
    import os

    import pandas as pd
    from filelock import FileLock

    table = collect(outputs) if outputs else pd.DataFrame(columns=["notebook", "status"])
    csv = out_dir / "results.csv"
    with FileLock(f"{csv}.lock", timeout=600):
        merged = table
        if csv.exists() and csv.stat().st_size > 0:
            try:
                before = pd.read_csv(io.StringIO(read_text(csv, "results table", 64 << 20)))
            except (ValueError, UnicodeDecodeError, OSError) as e:
                # rebuilt from this sweep's notebooks; the damaged file is kept, never lost
                before = None
                kept = csv.with_name(f"{csv.name}.damaged")
                os.replace(csv, kept)
                logging.getLogger(__name__).warning(
                    "%s: not a readable table (%s); kept as %s, and results.csv now lists "
                    "this sweep's points only",
                    csv,
                    " ".join(str(e).split())[:120],
                    kept,
                )
            if before is not None and "notebook" in before.columns:
                ours = set(table["notebook"].astype(str))
                keep = before[~before["notebook"].astype(str).isin(ours)]
                keep = keep[[Path(str(n)).exists() for n in keep["notebook"]]]
                merged = pd.concat([keep, table], ignore_index=True) if len(keep) else table
        atomic_write(csv, merged.to_csv(index=False))
    return csv, table
