"""Time ``zeus-nb tour --smoke``: every notebook executed headless on the simulated backend.

Target: under 5 minutes in total on 2 cores. Prints each notebook's seconds and the total
(``--json``: one object). Runs in a fresh temporary directory, so nothing is reused.

    python benchmarks/bench_tour.py [--json] [--full]
    python benchmarks/bench_tour.py --write-table [--note TEXT] [--keep-executed DIR]

``--write-table`` runs each notebook in smoke and in full mode, back to back, then the smoke tour
beside ``--busy N`` busy processes (default 2), and writes the one run-time table of the
project, ``zeus_nb/resources/run_times.json`` (with the machine's CPU count and load average
before and after each), then regenerates what quotes it: the README's table, each notebook
header's run-time paragraph and ``docs/notebooks.md`` (:func:`zeus_nb.course.runtimes.sync`).

    python benchmarks/bench_tour.py --background N [--repeat R] [--only 01,03]

``--background N`` runs the tour beside N busy processes (each spinning NumPy matrix products on
one thread, started and stopped here) and without them, alternately ``--repeat`` times, and
prints each notebook's median seconds without and with them and the ratio (target: every
notebook within 2x with 2 busy processes).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0


def run_tour(
    full: bool, keep: Path | None = None, only: str | None = None
) -> tuple[dict[str, float], float, subprocess.CompletedProcess]:
    """(seconds per notebook, total seconds, the finished process) of one tour.

    ``keep``: copy the executed notebooks there (e.g. to build the slides from them); ``only``:
    the notebooks to run (``zeus-nb tour --only``).
    """
    env = dict(os.environ, ZEUS_NB_BACKEND="sim")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "-o", "out"] + ([] if full else ["--smoke"])
    cmd += ["--only", only] if only else []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        total = time.monotonic() - start
        if keep is not None:
            shutil.copytree(Path(tmp) / "out", keep, dirs_exist_ok=True)
    per = {
        m[1]: float(m[2])
        for m in re.finditer(r"^(\d\d_\w+) \((?:ok|FAILED)[^\d]*([\d.]+) s", out.stdout, re.M)
    }
    return per, total, out


def write_table(note: str, keep: Path | None = None, busy: int = 2) -> int:
    """Measure the full and the smoke tour, then the smoke tour beside ``busy`` busy processes
    (what a student's Run All meets on a shared machine; 0: skip); write the run-time table and
    what quotes it."""
    sys.path.insert(0, str(REPO))
    from zeus_nb.course import runtimes

    load_before = os.getloadavg()[0]
    full: dict[str, float] = {}
    smoke: dict[str, float] = {}
    # Each notebook's two runs back to back, so both see about the same load on a shared machine.
    for number in sorted(p.name[:2] for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for is_full, into in ((False, smoke), (True, full)):
            times, _, out = run_tour(full=is_full, keep=keep if is_full else None, only=number)
            if out.returncode or not times:
                print(out.stdout[-3000:] + out.stderr[-2000:])
                return 1
            into.update(times)
    load_after = os.getloadavg()[0]
    loaded: dict | None = None
    if busy:
        with busy_processes(busy):
            busy_before = os.getloadavg()[0]
            times, _, out = run_tour(full=False)
            busy_after = os.getloadavg()[0]
        if out.returncode or not times:
            print(out.stdout[-3000:] + out.stderr[-2000:])
            return 1
        loaded = {
            "background": busy,
            "load_before": round(busy_before, 1),
            "load_after": round(busy_after, 1),
            "notebooks": {n: round(t, 1) for n, t in times.items()},
        }
    table = {
        "measured": datetime.date.today().isoformat(),
        "command": "python benchmarks/bench_tour.py --write-table",
        "machine": {
            "cpus": os.cpu_count(),
            "state": "shared with other jobs" if max(load_before, load_after) > 1.5 else "idle",
            "load_before": round(load_before, 1),
            "load_after": round(load_after, 1),
            "note": note,
        },
        "notebooks": {n: {"full": round(full[n], 1), "smoke": round(smoke[n], 1)} for n in full},
    }
    if loaded is not None:
        table["busy"] = loaded
    runtimes.TABLE.write_text(json.dumps(table, indent=2) + "\n")
    changed = runtimes.sync(REPO, table)
    subprocess.run(
        [sys.executable, "-m", "jupytext", "--sync", *map(str, changed)],
        check=False,
        capture_output=True,
    )
    for name in full:
        print(f"{name:28s} full {full[name]:6.1f} s   smoke {smoke[name]:6.1f} s")
    print(f"wrote {runtimes.TABLE} and {len(changed)} file(s) that quote it")
    return 0


BUSY = """
import numpy as np
a = np.random.default_rng(0).random((256, 256))
while True:
    a = a @ a
    a /= np.abs(a).max()
"""
LOADED_TARGET = 2.0  # each notebook within 2x of its time without the busy processes


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` processes that keep one core each busy, stopped on the way out."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", BUSY], env=env) for _ in range(n)]
    try:
        time.sleep(1.0)  # let them start spinning
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def compare_loaded(full: bool, only: str | None, n: int, repeat: int, as_json: bool) -> int:
    """Tours without and with ``n`` busy processes, alternately; medians and their ratios."""
    runs: dict[str, list[dict[str, float]]] = {"idle": [], "loaded": []}
    ok = True
    for i in range(repeat):
        for kind in ("idle", "loaded") if i % 2 == 0 else ("loaded", "idle"):
            with busy_processes(n if kind == "loaded" else 0):
                per, _, out = run_tour(full, only=only)
            runs[kind].append(per)
            if out.returncode:
                ok = False
                print(out.stdout[-2000:] + out.stderr[-2000:], file=sys.stderr)
    names = list(runs["idle"][0])
    med = {
        k: {nb: statistics.median(r[nb] for r in rs if nb in r) for nb in names}
        for k, rs in runs.items()
    }
    ratio = {nb: med["loaded"][nb] / med["idle"][nb] for nb in names}
    worst = max(ratio.values(), default=0.0)
    result = {"background": n, "repeat": repeat, "cpus": os.cpu_count(), "idle_s": med["idle"]}
    result |= {"loaded_s": med["loaded"], "ratio": ratio, "target": LOADED_TARGET, "ok": ok}
    if as_json:
        print(json.dumps(result))
    else:
        print(f"{'notebook':28s} {'idle s':>8s} {'loaded s':>9s} {'ratio':>6s}  ({n} busy)")
        for nb in names:
            print(f"{nb:28s} {med['idle'][nb]:8.1f} {med['loaded'][nb]:9.1f} {ratio[nb]:6.2f}")
        met = "met" if worst <= LOADED_TARGET else "NOT met"
        print(f"worst ratio {worst:.2f} (target <= {LOADED_TARGET:g}: {met}; medians of {repeat})")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--full", action="store_true", help="full runs instead of --smoke")
    ap.add_argument(
        "--write-table",
        action="store_true",
        help="run the full and the smoke tour, write zeus_nb/resources/run_times.json and "
        "regenerate the README table, notebook headers and docs/notebooks.md",
    )
    ap.add_argument(
        "--keep-executed",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --write-table: keep the full tour's executed notebooks in DIR",
    )
    ap.add_argument(
        "--note",
        default="On a busy machine every notebook takes longer; the ratios between them hold.",
        help="a sentence about the machine, printed under the README's table",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=2,
        metavar="N",
        help="with --write-table: also time the smoke tour beside N busy processes (0: skip)",
    )
    ap.add_argument("--only", help="comma-separated notebook numbers, e.g. 01,03")
    ap.add_argument("--background", type=int, default=0, metavar="N", help="busy processes")
    ap.add_argument("--repeat", type=int, default=1, help="paired runs with --background")
    args = ap.parse_args()
    if args.background:
        return compare_loaded(args.full, args.only, args.background, args.repeat, args.json)
    if args.write_table:
        return write_table(args.note, args.keep_executed, args.busy)
    per, total, out = run_tour(args.full, only=args.only)
    result = {
        "mode": "full" if args.full else "smoke",
        "cpus": os.cpu_count(),
        "notebooks": per,
        "total_s": round(total, 1),
        "target_s": TARGET_S,
        "ok": out.returncode == 0,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for name, s in per.items():
            print(f"{name:28s} {s:6.1f} s")
        print(f"{'total':28s} {total:6.1f} s (target {TARGET_S:.0f} s, {os.cpu_count()} CPUs)")
        if out.returncode:
            print(out.stdout[-2000:] + out.stderr[-2000:])
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
