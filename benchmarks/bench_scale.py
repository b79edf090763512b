"""Scaling out: sweep speed-up on local Dask workers, and batch-size store throughput.

1. Sweep: ``run_sweep`` over 8 (batch size, power limit) configurations of the simulated A40 on
   the ImageNet traces, with 1 and then 2 local workers (one process and one intra-op thread
   each) in the same run, interleaved ``--repeat`` times (best of each, so a burst of load from
   other processes hits both alike). Every epoch does a fixed amount of real CPU work (float32
   matrix products in torch) besides charging the simulated GPU, so the points cost wall time
   like training does. The clusters are started, and every worker has imported torch and
   zeus-nb and loaded the simulated GPU's traces, before the clocks start; the speed-up is
   t(1 worker) / t(2 workers). The load average is printed with it: on a machine busy with
   other work two workers cannot get two cores.
2. Store: reports per second into one job's state (``BatchSizeOptimizer.report``: one
   transaction plus reading the others' new reports), with 1 and 4 writer processes at once, for
   a SQLite file (WAL) and a PostgreSQL 15 server started for the benchmark (as in the tests;
   fsync on). Needs the PostgreSQL server binaries; without them that row is skipped.

    python benchmarks/bench_scale.py [--work 40] [--repeat 2] [--reports 200]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

BATCH_SIZES = [64, 128, 256, 512]
LIMITS = [175.0, 250.0]


class CpuTrain:
    """``train_fn``: per epoch, ``work`` 256x256 matrix-product rounds, then the sim's step.

    Reaches the target (1.0) at the second epoch, like every traced run reaching its target.
    """

    def __init__(self, work: int):
        self.work = work

    def __call__(self, batch_size: int, epoch: int) -> float:
        import torch

        from zeus_nb import device

        torch.set_num_threads(1)
        g = torch.Generator().manual_seed(epoch)
        a = torch.rand(256, 256, generator=g)
        for _ in range(self.work * 10):
            a = torch.tanh(a @ a)
        device.step(100, batch_size=batch_size)
        return 1.0 if epoch >= 1 else 0.0


def _warm_up() -> None:
    """On each worker before the clock starts: import torch and zeus-nb, load the traces."""
    import torch

    from zeus_nb import device, monitor  # noqa: F401 (imported for the timing)
    from zeus_nb.runner import points  # noqa: F401 (imported for the timing)

    torch.set_num_threads(1)
    device.use_simulated("a40", "imagenet", num_gpus=1)


def sweep_seconds(workers: int, work: int, out: Path) -> tuple[float, float]:
    """(cluster start-up s, sweep s) of the 8-point sweep on ``workers`` local workers."""
    from distributed import Client

    from zeus_nb import device
    from zeus_nb.runner.cluster import local_cluster
    from zeus_nb.runner.sweep import run_sweep

    out.mkdir(parents=True, exist_ok=True)
    device.use_simulated("a40", "imagenet")
    t0 = time.perf_counter()
    with local_cluster(workers) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        client.run(_warm_up)
        t1 = time.perf_counter()
        df = run_sweep(
            CpuTrain(work),
            BATCH_SIZES,
            LIMITS,
            results_path=out / f"sweep-{workers}.jsonl",
            target_metric=1.0,
            max_epochs=3,
            executor=client,
            progress=False,
        )
        t2 = time.perf_counter()
    assert len(df) == len(BATCH_SIZES) * len(LIMITS) and df["reached"].all()
    return t1 - t0, t2 - t1


def _writer(url: str, n: int, barrier, me: int) -> None:
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
    from zeus_nb.optimizer.batch_size.store_url import open_store

    bso = BatchSizeOptimizer(
        "bench", open_store(url), batch_sizes=[32, 64, 128, 256], default_batch_size=64,
        max_power=300.0,
    )  # fmt: skip
    barrier.wait()
    for i in range(n):
        bso.report(64, time=100.0 + i, energy=2e4 + me, reached=True)


def reports_per_second(url: str, writers: int, n: int) -> float:
    """Reports/s of ``writers`` processes reporting ``n`` results each to one job."""
    from zeus_nb.optimizer.batch_size.store_url import open_store

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers + 1)
    procs = [ctx.Process(target=_writer, args=(url, n, barrier, me)) for me in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - t0
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError("a writer failed")
    store = open_store(url, create=False)
    total = len(store.observations("bench"))
    store.delete("bench")
    assert total == writers * n, (total, writers * n)
    return total / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=int, default=40, help="CPU work per epoch (x10 matmuls)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved sweep rounds (best of)")
    ap.add_argument("--reports", type=int, default=200, help="reports per writer")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("ZEUS_NB_BACKEND", "sim")
    print(f"machine: {os.cpu_count()} CPU core(s) visible; python {sys.version.split()[0]}")

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.environ["ZEUS_NB_STATE_DIR"] = str(tmp / "state")
        if not args.skip_sweep:
            times: dict[int, list[float]] = {1: [], 2: []}
            load0 = os.getloadavg()[0]
            for r in range(args.repeat):
                for w in (1, 2):
                    times[w].append(sweep_seconds(w, args.work, tmp / f"{r}")[1])
            one, two = min(times[1]), min(times[2])
            n = len(BATCH_SIZES) * len(LIMITS)
            print(
                f"sweep of {n} simulated points (2 epochs each, work {args.work}), best of "
                f"{args.repeat}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}:"
            )
            print(f"  1 worker : {one:6.2f} s  (all: {', '.join(f'{t:.1f}' for t in times[1])})")
            print(f"  2 workers: {two:6.2f} s  (all: {', '.join(f'{t:.1f}' for t in times[2])})")
            print(f"  speed-up : {one / two:.2f}x")

        print(f"store throughput ({args.reports} reports per writer, one job):")
        sqlite_url = f"sqlite:///{tmp / 'bench.sqlite3'}"
        for w in (1, 4):
            rate = reports_per_second(sqlite_url, w, args.reports)
            print(f"  SQLite     {w} writer(s): {rate:8.0f} reports/s")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_fixture import PostgresServer

        why = PostgresServer.available()
        if why:
            print(f"  PostgreSQL: skipped ({why})")
            return
        with PostgresServer(fsync=True) as server:
            url = server.create_database("bench")
            for w in (1, 4):
                rate = reports_per_second(url, w, args.reports)
                print(f"  PostgreSQL {w} writer(s): {rate:8.0f} reports/s")


if __name__ == "__main__":
    main()
