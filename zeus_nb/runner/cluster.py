"""Run sweep points in parallel on a Dask cluster, one GPU per point.

A sweep point (one notebook execution, one batch size x power limit run) needs a whole GPU, so
every worker advertises one ``GPU`` resource and every point asks for it: at most one point runs
per GPU at a time. Three ways to get workers:

* ``workers=N``: a local cluster of N worker processes (one intra-op thread each). On real GPUs
  worker *i* sees only the *i*-th visible GPU (``CUDA_VISIBLE_DEVICES``); on the simulated
  backend every worker process simulates its own GPU.
* ``scheduler="tcp://host:8786"``: an existing Dask cluster whose workers were started with
  ``--resources GPU=1`` (one worker process per GPU).
* ``cluster="slurm"``: worker jobs submitted through dask-jobqueue (:class:`SlurmOptions`).

:func:`run_points` submits the points and streams results back with ``as_completed``; only
the client (the calling process) writes them, through its ``on_result`` callback, so a finished
point is written exactly once. A point whose worker dies is re-run once on another worker and
then reported as failed. Ctrl-C stops submitting, lets the running points finish and writes
them (a second Ctrl-C, or ``on_interrupt="cancel"``, cancels them instead) and re-raises; the
caller's own skip-what-is-done logic makes the next run resume.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.runner.interrupts import CountedInterrupts
from zeus_nb.runner.workers import IgnoreInterrupts, PinGPU

if TYPE_CHECKING:
    from distributed import Client

log = logging.getLogger(__name__)

GPU = "GPU"
READY_POLL_S = 0.05  # how often a waiting client looks for finished points and Ctrl-C
CONNECT_TIMEOUT = "5s"  # to reach a scheduler: a wrong address fails in seconds, not a minute
WORKER_TIMEOUT = 60.0  # s an existing scheduler has to show a worker with a GPU resource
# A point whose worker dies is tried on one more worker, then reported as failed.
ALLOWED_FAILURES = 1
ALLOWED_FAILURES_ENV = "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"


class ClusterError(ZeusNbError):
    """The Dask cluster cannot be started or reached, or its workers cannot run points."""


@dataclass
class SlurmOptions:
    """Worker jobs for a Slurm cluster (dask-jobqueue's ``SLURMCluster``).

    Each job holds ``gpus_per_job`` GPUs (``--gres=gpu:N``) and runs one worker process per GPU;
    ``jobs`` jobs are submitted. ``cores`` and ``memory`` are per job.
    """

    queue: str | None = None
    account: str | None = None
    walltime: str = "01:00:00"
    gpus_per_job: int = 1
    jobs: int = 1
    cores: int | None = None
    memory: str = "16GB"
    job_extra_directives: list[str] = field(default_factory=list)
    python: str | None = None

    def cluster_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``SLURMCluster``: one worker process and one GPU per point."""
        if self.gpus_per_job < 1:
            raise ClusterError(f"gpus_per_job must be >= 1, got {self.gpus_per_job}")
        kw: dict[str, Any] = {
            "queue": self.queue,
            "account": self.account,
            "walltime": self.walltime,
            "cores": self.cores or self.gpus_per_job,
            "processes": self.gpus_per_job,
            "memory": self.memory,
            "job_extra_directives": [f"--gres=gpu:{self.gpus_per_job}", *self.job_extra_directives],
            "worker_extra_args": ["--resources", f"{GPU}=1"],
            "job_script_prologue": [f"export {ALLOWED_FAILURES_ENV}={ALLOWED_FAILURES}"],
        }
        if self.python:
            kw["python"] = self.python
        return kw


def slurm_cluster(options: SlurmOptions | None = None, **scheduler_kwargs):
    """A dask-jobqueue ``SLURMCluster`` (not yet scaled) for GPU sweep points."""
    import signal
    import threading

    # Importing dask_jobqueue makes SIGINT exit the process (its runner module installs a
    # handler); Ctrl-C must stay a KeyboardInterrupt so the sweep can stop cleanly.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as e:
        raise ClusterError(
            "--cluster slurm needs dask-jobqueue: pip install 'zeus-nb[cluster]'"
        ) from e
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGINT, previous)
    opts = options or SlurmOptions()
    return SLURMCluster(**opts.cluster_kwargs(), **scheduler_kwargs)


def require_sbatch() -> None:
    """Fail at once where Slurm's ``sbatch`` is missing: jobs could never be submitted, and
    the sweep would wait for workers that never come."""
    import shutil

    if shutil.which("sbatch") is None:
        raise ClusterError(
            "--cluster slurm needs Slurm's sbatch, which is not on PATH here; run zeus-nb on "
            "a Slurm login node, or use --workers N or --scheduler ADDRESS"
        )


def _import_distributed():
    try:
        import distributed
    except ImportError as e:
        raise ClusterError(
            "running points on workers needs Dask distributed: pip install 'zeus-nb[cluster]'"
        ) from e
    return distributed


def local_cluster(n_workers: int, **kwargs):
    """N worker processes on this machine, one thread and one ``GPU`` resource each."""
    distributed = _import_distributed()
    import dask

    if n_workers < 1:
        raise ClusterError(f"--workers must be >= 1, got {n_workers}")
    kw = {
        "n_workers": n_workers,
        "threads_per_worker": 1,
        "processes": True,
        "resources": {GPU: 1},
        "dashboard_address": None,
        "host": "127.0.0.1",
    }
    kw.update(kwargs)
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        return distributed.LocalCluster(**kw)


@contextlib.contextmanager
def open_client(
    executor: Any = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    slurm: SlurmOptions | None = None,
) -> Iterator[Client]:
    """A Dask client for the given execution target; closes what it started.

    ``executor`` may be a ``distributed.Client`` (used as is), an int (local workers), a
    scheduler address, ``"slurm"``, :class:`SlurmOptions`, or a cluster object; or give one of
    the keywords.
    """
    distributed = _import_distributed()
    if isinstance(executor, SlurmOptions):
        executor, cluster, slurm = None, "slurm", executor
    if executor is not None:
        if isinstance(executor, distributed.Client):
            yield executor
            return
        if isinstance(executor, bool):
            raise ClusterError(f"executor must be a worker count or an address, not {executor}")
        if isinstance(executor, int):
            workers = executor
        elif isinstance(executor, str):
            if executor == "slurm":
                cluster = "slurm"
            else:
                scheduler = executor
        else:  # a cluster object (LocalCluster, SLURMCluster, ...)
            with distributed.Client(executor) as client:
                _register(client)
                yield client
            return
    given = [x for x in (workers, scheduler, cluster) if x is not None]
    if len(given) != 1:
        raise ClusterError("give exactly one of workers=N, scheduler=ADDRESS or cluster='slurm'")
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError, TypeError) as e:
            raise ClusterError(
                f"cannot reach the Dask scheduler at {scheduler} within {CONNECT_TIMEOUT} "
                f"({' '.join(str(e).split())[:120]}); check the address, start one with "
                "`dask scheduler` and workers with `dask worker ADDRESS --resources GPU=1`"
            ) from None
        with client:
            _require_gpu_workers(client, scheduler)
            _register(client)
            _check_retries(client)
            yield client
        return
    if cluster is not None:
        if cluster != "slurm":
            raise ClusterError(f"unknown cluster {cluster!r}; the supported one is 'slurm'")
        opts = slurm or SlurmOptions()
        require_sbatch()
        with dask_allowed_failures(), slurm_cluster(opts) as c:
            c.scale(jobs=opts.jobs)
            with distributed.Client(c) as client:
                _register(client)
                yield client
        return
    with local_cluster(int(workers)) as c, distributed.Client(c) as client:
        _register(client)
        client.register_plugin(IgnoreInterrupts())
        yield client


@contextlib.contextmanager
def dask_allowed_failures(n: int = ALLOWED_FAILURES):
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": n}):
        yield


def _require_gpu_workers(client: Client, address: str, timeout: float = WORKER_TIMEOUT) -> None:
    """Wait (bounded) for a worker that advertises a GPU: without one, every point would wait
    for ever."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        raise ClusterError(
            f"the Dask scheduler at {address} has no worker after {timeout:g} s; start one "
            f"per GPU with `dask worker {address} --resources {GPU}=1`"
        ) from None
    workers = client.scheduler_info().get("workers", {}).values()
    if not any(w.get("resources", {}).get(GPU) for w in workers):
        raise ClusterError(
            f"no worker of the Dask scheduler at {address} advertises a {GPU} resource, so no "
            f"point could run; start workers with `dask worker {address} --resources {GPU}=1`"
        )


def _register(client: Client) -> None:
    client.register_plugin(PinGPU())


def _check_retries(client: Client) -> None:
    """Warn when an external scheduler re-runs points of dead workers more than once."""
    try:
        n = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    except Exception:  # an old or locked-down scheduler: not worth failing over
        return
    if n != ALLOWED_FAILURES:
        log.warning(
            "the scheduler re-runs a point whose worker died up to %s times (zeus-nb expects "
            "%s); start it with %s=%s",
            n,
            ALLOWED_FAILURES,
            ALLOWED_FAILURES_ENV,
            ALLOWED_FAILURES,
        )


@dataclass
class PointsOutcome:
    """What :func:`run_points` did: keys finished, keys failed (with the reason)."""

    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _describe(exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return f"its worker died on both tries ({ALLOWED_FAILURES + 1} workers lost)"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"


def gpu_slots(client: Client) -> int:
    """How many points the cluster's workers can run at once (their ``GPU`` resources)."""
    workers = client.scheduler_info().get("workers", {})
    return int(sum(w.get("resources", {}).get(GPU, 0) for w in workers.values()))


def run_points(
    points: Mapping[str, Any],
    fn: Callable[[Any], Any],
    client: Client,
    *,
    on_result: Callable[[str, Any], None],
    on_failure: Callable[[str, str], None] | None = None,
    progress: bool = True,
    desc: str = "sweep",
    done_before: int = 0,
    on_interrupt: str = "wait",
) -> PointsOutcome:
    """Run ``fn(point)`` for every point on the cluster, one ``GPU`` resource each.

    ``on_result(key, result)`` is called here, in the client, once per finished point and in
    the order points finish: it is where results get written. A point whose ``fn`` raised, or
    whose worker died on both tries, goes to ``on_failure(key, reason)`` and the rest go on.
    Points are submitted as GPUs free up, never more than the workers' GPUs at once: a point
    queued on a worker that dies would count that death against it, though it never ran.
    On Ctrl-C nothing more is submitted; with ``on_interrupt="wait"`` (default) the running
    points finish and are written first (a second Ctrl-C cancels them), with ``"cancel"`` they
    are cancelled at once (a point already running on a worker still runs to its end there,
    unrecorded). Then KeyboardInterrupt is re-raised; what ``on_result`` wrote stays, and a
    later run that skips written points resumes. ``done_before`` counts points skipped
    earlier on the progress bar.
    """
    if on_interrupt not in ("wait", "cancel"):
        raise InputError(f"on_interrupt must be 'wait' or 'cancel', got {on_interrupt!r}")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = len(points) + done_before
        bar = tqdm(total=total, initial=done_before, desc=desc, unit="point")
    flight = _Flight(client, fn, points, on_result, on_failure, bar)
    try:
        with CountedInterrupts() as ctrl_c:
            flight.top_up()
            while not ctrl_c.count and not flight.completed.is_empty():
                for fut in flight.ready(ctrl_c):
                    flight.collect(fut)
                    if not ctrl_c.count:  # a Ctrl-C during the collect: submit nothing more
                        flight.top_up()
            if ctrl_c.count:
                flight.queue.clear()  # submit nothing more
                flight.after_interrupt(ctrl_c, wait=on_interrupt == "wait")
    except BaseException:  # a failure, or a Ctrl-C the handler could not take: cancel all
        flight.queue.clear()
        _cancel(client, flight.futures)
        raise
    finally:
        if bar is not None:
            bar.close()
    if ctrl_c.count:
        raise KeyboardInterrupt
    return flight.outcome


class _Flight:
    """The points of one :func:`run_points` call: queued, submitted, collected."""

    def __init__(self, client, fn, points, on_result, on_failure, bar) -> None:
        from distributed import as_completed

        self.client, self.fn, self.bar = client, fn, bar
        self.on_result, self.on_failure = on_result, on_failure
        self.queue = list(points.items())[::-1]
        self.futures: dict[Any, str] = {}
        self.collected: set[str] = set()
        self.outcome = PointsOutcome()
        self.run = uuid.uuid4().hex[:8]  # a resumed run never meets a key of an abandoned one
        self.completed = as_completed()

    def top_up(self) -> None:
        """Submit points while the workers have a free GPU (at least one in flight)."""
        room = max(1, gpu_slots(self.client)) - sum(not f.done() for f in self.futures)
        while self.queue and room > 0:
            key, point = self.queue.pop()
            fut = self.client.submit(
                self.fn, point, key=f"zeus-nb-{key}-{self.run}", resources={GPU: 1}
            )
            self.futures[fut] = key
            self.completed.add(fut)
            room -= 1

    def collect(self, fut) -> None:
        """Hand a finished point to ``on_result``, a failed one to ``on_failure``."""
        key = self.futures[fut]
        self.collected.add(key)
        if fut.status == "finished":
            self.on_result(key, fut.result())
            self.outcome.done.append(key)
        elif fut.status != "cancelled":
            reason = _describe(fut.exception())
            self.outcome.failed[key] = reason
            log.warning("point %s failed: %s", key, reason)
            if self.on_failure is not None:
                self.on_failure(key, reason)
        fut.release()
        if self.bar is not None:
            self.bar.update(1)

    def ready(self, ctrl_c: CountedInterrupts, futures=None) -> list:
        """The finished points of ``futures`` (default: all submitted), once one is finished
        or Ctrl-C came (then perhaps none). Polled, so that Ctrl-C is seen within 50 ms."""
        done = self.completed if futures is None else futures
        start = ctrl_c.count
        while ctrl_c.count == start:
            if done.has_ready():
                return done.next_batch(block=False)
            if done.is_empty():
                return []
            time.sleep(READY_POLL_S)
        return []

    def after_interrupt(self, ctrl_c: CountedInterrupts, wait: bool) -> None:
        """After Ctrl-C: let the running points finish and be written (until Ctrl-C again), or
        cancel them."""
        from distributed import as_completed

        left = [f for f, key in self.futures.items() if key not in self.collected]
        if not (wait and left):
            _cancel(self.client, self.futures)
            return
        log.warning(
            "stopping: waiting for %d running point(s) to finish (Ctrl-C again to cancel "
            "them); run again to resume",
            sum(not f.done() for f in left),
        )
        pending, first = as_completed(left), ctrl_c.count
        while not pending.is_empty() and ctrl_c.count == first:
            for fut in self.ready(ctrl_c, pending):
                self.collect(fut)
        if ctrl_c.count != first:
            _cancel(self.client, self.futures)


def _cancel(client: Client, futures) -> None:
    pending = [f for f in futures if not f.done()]
    if pending:
        log.warning("stopping: cancelling %d unfinished point(s)", len(pending))
        client.cancel(pending, force=True)
