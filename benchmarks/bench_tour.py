"""Time ``zeus-nb tour --smoke``: every notebook executed headless on the simulated backend.

Target: under 5 minutes in total on 2 cores. Prints each notebook's seconds and the total
(``--json``: one object). Runs in a fresh temporary directory, so nothing is reused.

    python benchmarks/bench_tour.py [--json] [--full]

``--background N`` runs the tour beside N busy processes (each spinning NumPy matrix products on
one thread, started and stopped here) and without them, alternately ``--repeat`` times, and
prints each notebook's median seconds without and with them and the ratio (target: every
notebook within 2x with 2 busy processes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--full", action="store_true", help="full runs instead of --smoke")
    ap.add_argument("--only", help="comma-separated notebook numbers, e.g. 01,03")
    ap.add_argument("--background", type=int, default=0, metavar="N", help="busy processes")
    ap.add_argument("--repeat", type=int, default=1, help="paired runs with --background")
    args = ap.parse_args()
    env = dict(os.environ, ZEUS_NB_BACKEND="sim")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "-o", "out"] + (
        [] if args.full else ["--smoke"]
    )
    cmd += ["--only", args.only] if args.only else []
    if args.background:
        return compare_loaded(cmd, env, args.background, args.repeat, args.json)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        total = time.monotonic() - start
    per = {
        m[1]: float(m[2])
        for m in re.finditer(r"^(\d\d_\w+) \((?:ok|FAILED)[^\d]*([\d.]+) s", out.stdout, re.M)
    }
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


# --- the tour beside busy processes -------------------------------------------------------------
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


def tour_seconds(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, float], bool, str]:
    """Each notebook's seconds in one tour, whether all ran, and the output's tail."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    per = {
        m[1]: float(m[2])
        for m in re.finditer(r"^(\d\d_\w+) \((?:ok|FAILED)[^\d]*([\d.]+) s", out.stdout, re.M)
    }
    return per, out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def compare_loaded(cmd: list[str], env: dict[str, str], n: int, repeat: int, as_json: bool) -> int:
    """Tours without and with ``n`` busy processes, alternately; medians and their ratios."""
    runs: dict[str, list[dict[str, float]]] = {"idle": [], "loaded": []}
    ok = True
    for i in range(repeat):
        for kind in ("idle", "loaded") if i % 2 == 0 else ("loaded", "idle"):
            with busy_processes(n if kind == "loaded" else 0):
                per, good, tail = tour_seconds(cmd, env)
            runs[kind].append(per)
            if not good:
                ok = False
                print(tail, file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
