"""CPU and wall time of one torchrun job: ``torchrun`` beside ``zeus_nb.train.forkrun``, and
beside the forkrun launcher a process keeps for its later jobs (what ``launch()`` uses).

    python benchmarks/bench_launch.py [--repeat R] [--job pipeline|dp]

The job is notebook 06's live pipeline step (tiny-gpt, 4 stages, simulated A40s: what each of its
``launch(4, ...)`` calls runs) or notebook 05's two-rank DDP run (``--job dp``). Each launcher runs
it ``--repeat`` times, alternately, and the lines print the medians side by side with their ratio
and the results each gave (they must be the same). Then this process runs the job ``--repeat``
times in a row through the kept launcher (:mod:`zeus_nb.train.launcher`), as a notebook's
``launch()`` calls do: the first job starts it, the later ones find it; the line prints the
mean per job. CPU time counts every process the launch started: this process becomes their
"child subreaper" (Linux ``prctl``), so the fork server and the ranks, which their own parents
never wait for, are waited for here and their CPU time is counted in ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from subreaper import become_subreaper, children_cpu, reap

from zeus_nb.train import launcher

REPO = Path(__file__).resolve().parents[1]
JOBS = {
    "pipeline": (
        4,
        "zeus_nb.train.pipeline",
        ["--backend", "sim", "--model", "tiny-gpt", "--pp", "4", "--num-microbatches", "4",
         "--max-steps", "1", "--num-warmup-steps", "0", "--num-prof-steps", "1",
         "--results-json"],
    ),
    "dp": (
        2,
        "zeus_nb.train.dp",
        ["--data", "synthetic", "--backend", "sim", "--epochs", "1", "--no-progress", "--results"],
    ),
}  # fmt: skip
LAUNCHERS = {
    "torchrun": lambda n, module: [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), "-m", module
    ],
    "forkrun": lambda n, module: [
        "-m", "zeus_nb.train.forkrun", "--nproc_per_node", str(n), module
    ],
}  # fmt: skip


def job_command(name: str, job: str, out: Path) -> list[str]:
    nproc, module, args = JOBS[job]
    return [sys.executable, *LAUNCHERS[name](nproc, module), *args, str(out)]


def job_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_SIM_GPU="a40", OMP_NUM_THREADS="1")
    env["ZEUS_NB_STATE_DIR"] = str(tmp / "state")
    return env


def one_run(name: str, job: str, tmp: Path) -> tuple[float, float, dict]:
    out = tmp / f"{name}.json"
    cpu0, t0 = children_cpu(), time.perf_counter()
    run = subprocess.run(
        job_command(name, job, out), env=job_env(tmp), capture_output=True, text=True
    )
    reap()
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if run.returncode != 0:
        sys.exit(f"{name} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return cpu, wall, json.loads(out.read_text())


def kept_runs(job: str, tmp: Path, repeat: int) -> tuple[float, float, dict]:
    """``repeat`` jobs in a row through the kept launcher; CPU and wall per job, the results."""
    out = tmp / "kept.json"
    cpu0, t0 = children_cpu(), time.perf_counter()
    for _ in range(repeat):
        tail: deque[str] = deque(maxlen=40)
        if launcher.stream(job_command("forkrun", job, out), job_env(tmp), tail, False, None):
            sys.exit("the kept launcher's job failed:\n" + "\n".join(tail))
    launcher.close_kept()
    reap()
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    return cpu / repeat, wall / repeat, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--job", choices=sorted(JOBS), default="pipeline")
    args = parser.parse_args()
    become_subreaper()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in LAUNCHERS}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_launch_") as tmp:
        for i in range(args.repeat):
            order = list(LAUNCHERS) if i % 2 == 0 else list(reversed(LAUNCHERS))
            for name in order:
                cpu, wall, results[name] = one_run(name, args.job, Path(tmp))
                times[name].append((cpu, wall))
        kept_cpu, kept_wall, results["kept"] = kept_runs(args.job, Path(tmp), args.repeat)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    nproc = JOBS[args.job][0]
    print(f"{args.job} job, {nproc} ranks, {args.repeat} runs each (load average now {load}):")
    med = {n: [statistics.median(x[k] for x in times[n]) for k in (0, 1)] for n in LAUNCHERS}
    for name, (cpu, wall) in med.items():
        print(f"  {name:9s} {cpu:6.1f} s of CPU, {wall:6.1f} s wall (medians)")
    cpu_ratio = med["forkrun"][0] / med["torchrun"][0]
    wall_ratio = med["forkrun"][1] / med["torchrun"][1]
    print(f"  forkrun / torchrun: CPU {cpu_ratio:.2f}x, wall {wall_ratio:.2f}x")
    print(
        f"  kept     {kept_cpu:6.1f} s of CPU, {kept_wall:6.1f} s wall (means of {args.repeat} "
        f"jobs in a row, the first starting it): {kept_cpu / med['torchrun'][0]:.2f}x and "
        f"{kept_wall / med['torchrun'][1]:.2f}x torchrun's"
    )
    key = "iterations" if args.job == "pipeline" else "profile"
    same = results["torchrun"].get(key) == results["forkrun"].get(key) == results["kept"].get(key)
    print(f"  the same results ({key} of rank 0's JSON, all three): {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
