"""Warm kernels against cold ones: ``zeus-nb tour --smoke`` with ``ZEUS_NB_WARM_KERNELS=1``
beside the same tour with ``=0`` (every kernel started the usual way).

    python benchmarks/bench_kernels.py [--repeat R]

The two tours run alternately ``--repeat`` times (default 2) on the simulated backend, each in a
fresh folder; the lines print each one's median wall and CPU time side by side with their
ratios, and whether every notebook recorded the same results both ways (the records must be
equal: a warm kernel computes what a cold one does). CPU time counts every process a tour
started: this process becomes their "child subreaper" (Linux ``prctl``), so processes their own
parents never wait for are waited for here and counted in ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from subreaper import become_subreaper, children_cpu, reap

from zeus_nb.runner.records import read_notebook

REPO = Path(__file__).resolve().parents[1]


def tour(warm: bool, folder: Path) -> tuple[float, float, dict[str, dict]]:
    """(wall s, CPU s, each notebook's records) of one smoke tour."""
    env = dict(os.environ, ZEUS_NB_BACKEND="sim", ZEUS_NB_WARM_KERNELS="1" if warm else "0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "--smoke", "-o", str(folder)]
    cpu0, t0 = children_cpu(), time.perf_counter()
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    reap()
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if run.returncode != 0:
        sys.exit(f"the {'warm' if warm else 'cold'} tour failed:\n{run.stdout[-3000:]}")
    records = {p.stem: read_notebook(p)["records"] for p in sorted(folder.glob("*.ipynb"))}
    return wall, cpu, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    become_subreaper()
    load = os.getloadavg()[0]
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    records: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for warm in (False, True) if i % 2 == 0 else (True, False):
                wall, cpu, rec = tour(warm, Path(tmp) / f"{'warm' if warm else 'cold'}{i}")
                runs[warm].append((wall, cpu))
                records[warm].append(rec)
    cold = [statistics.median(x) for x in zip(*runs[False], strict=True)]
    warm = [statistics.median(x) for x in zip(*runs[True], strict=True)]
    same = all(r == records[False][0] for r in records[False] + records[True])
    print(
        f"smoke tour of the six notebooks, medians of {args.repeat} alternating runs "
        f"(load {load:.2f} -> {os.getloadavg()[0]:.2f}): warm kernels {warm[0]:.1f} s wall, "
        f"{warm[1]:.1f} s CPU; cold {cold[0]:.1f} s wall, {cold[1]:.1f} s CPU: "
        f"{warm[0] / cold[0]:.2f}x the wall time, {warm[1] / cold[1]:.2f}x the CPU time; "
        f"records {'the same' if same else 'DIFFERENT'} in every run"
    )


if __name__ == "__main__":
    main()
