"""``python -m zeus_nb.monitor energy|power``: live GPU energy or power, like Zeus's monitor CLI.

``energy`` measures one window from start until Ctrl+C (or ``--duration`` seconds) and prints it.
``power`` prints each GPU's power every ``--update-period`` seconds, then the time and the energy
integrated from those samples. On the simulated backend the GPU follows the wall clock here
(``ZEUS_NB_SIM_CLOCK=wall`` unless set otherwise), since nothing calls ``zeus_nb.step()``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import datetime

from zeus_nb import device
from zeus_nb.device.base import POWER_DOMAINS
from zeus_nb.errors import InputError
from zeus_nb.inputs.args import Parser, count, seconds
from zeus_nb.inputs.env import env
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.monitor.power import DEFAULT_UPDATE_PERIOD, PowerMonitor
from zeus_nb.utils.boundary import run_main


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM (``timeout 60 ...``, ``kill``) ends a measurement as Ctrl+C does: the window or
    the totals are still printed, instead of the process dying with nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_setup(gpu_indices: list[int] | None, backend: str | None) -> None:
    """Refuse what would measure nothing real: the simulated GPU on its virtual clock (these
    commands run by wall time, so 0 s), or a GPU index the system does not have."""
    if device.resolve_backend(backend) != "nvml" and env("ZEUS_NB_SIM_CLOCK") == "virtual":
        raise InputError(
            f"{PROG} runs by wall time, but ZEUS_NB_SIM_CLOCK=virtual keeps the simulated GPU "
            "still (0 s, 0 J): unset it or set ZEUS_NB_SIM_CLOCK=wall"
        )
    system = device.current(backend)
    have = len(system.gpus)
    missing = [i for i in gpu_indices or [] if i >= have]
    if missing:
        sim = system.backend == "sim"
        more = "; a simulated system has ZEUS_NB_SIM_GPUS of them" if sim else ""
        raise InputError(
            f"--gpu-indices {' '.join(map(str, missing))}: this system has {have} GPU(s), "
            f"indices 0..{have - 1}{more}"
        )


def _wait(duration: float | None) -> None:
    """Sleep ``duration`` s, or until Ctrl+C when None."""
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(duration if duration is not None else 365 * 24 * 3600)


def energy(
    gpu_indices: list[int] | None = None,
    duration: float | None = None,
    backend: str | None = None,
) -> None:
    """Print the time and energy of one window from now until Ctrl+C or ``duration`` s."""

    monitor = ZeusMonitor(gpu_indices, backend=backend)
    monitor.begin_window("zeus_nb.monitor.energy")
    with _sigterm_as_ctrl_c():
        _wait(duration)
    m = monitor.end_window("zeus_nb.monitor.energy")
    print(f"Time (s): {m.time:.3f}")
    for i, joules in m.gpu_energy.items():
        print(f"GPU{i} energy (J): {joules:.3f}")
    for label, values in (("CPU", m.cpu_energy), ("DRAM", m.dram_energy)):
        for i, joules in (values or {}).items():
            print(f"{label}{i} energy (J): {joules:.3f}")
    print(f"Total GPU energy (J): {m.total_energy:.3f}")


def power(
    gpu_indices: list[int] | None = None,
    update_period: float = 1.0,
    power_domain: str = "device_instant",
    duration: float | None = None,
    backend: str | None = None,
) -> None:
    """Print power every ``update_period`` s until Ctrl+C or ``duration`` s, then the totals."""

    # The energy is integrated from the samples between start and end, so sample at least every
    # 0.1 s whatever the printing period: at one sample per printed line, a run as long as one
    # period holds a single sample in its range, which integrates to 0 J.
    monitor = PowerMonitor(
        gpu_indices,
        min(update_period, DEFAULT_UPDATE_PERIOD),
        power_domains=[power_domain],
        backend=backend,
    )
    first = [t for pts in monitor.get_power_timeline(power_domain).values() for t, _ in pts]
    start = min(first, default=time.time())  # from the sample the monitor took as it started
    deadline = None if duration is None else time.monotonic() + duration
    with _sigterm_as_ctrl_c(), contextlib.suppress(KeyboardInterrupt):
        while deadline is None or time.monotonic() < deadline:
            left = (
                update_period
                if deadline is None
                else min(update_period, deadline - time.monotonic())
            )
            time.sleep(max(0.0, left))
            watts = monitor.get_power(power_domain=power_domain)
            if watts is not None:
                readings = ", ".join(f"GPU{i}: {w:.1f} W" for i, w in watts.items())
                print(f"{datetime.now().isoformat(timespec='milliseconds')} {readings}", flush=True)
    end = time.time()
    monitor.stop()
    print(f"Total time (s): {end - start:.3f}")
    joules = monitor.get_energy(start, end, power_domain)
    if joules is not None:
        print("Total energy (J): " + ", ".join(f"GPU{i}: {e:.3f}" for i, e in joules.items()))


PROG = "python -m zeus_nb.monitor"


def parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="subcommand", required=True)
    for name, text in (
        ("energy", "time and energy from now until Ctrl+C"),
        ("power", "power every update period; time and energy at the end"),
    ):
        s = sub.add_parser(name, help=text)
        s.add_argument("--gpu-indices", nargs="+", type=count(0, 1023), help="default: all GPUs")
        s.add_argument("--duration", type=seconds, help="stop after this many seconds")
        s.add_argument("--backend", choices=("auto", "sim", "nvml"))
        if name == "power":
            s.add_argument("--update-period", type=seconds, default=1.0, help="seconds")
            s.add_argument("--power-domain", choices=POWER_DOMAINS, default="device_instant")
    return p


def main(argv: list[str] | None = None) -> int:
    """Inside the one error boundary (:func:`zeus_nb.utils.boundary.run_main`): a bad option
    or GPU index is one line naming it, exit status 2. SIGTERM ends it as Ctrl+C does."""

    def run(args_list: list[str]) -> int:
        args = parser().parse_args(args_list)
        os.environ.setdefault("ZEUS_NB_SIM_CLOCK", "wall")
        _check_setup(args.gpu_indices, args.backend)
        if args.subcommand == "energy":
            energy(args.gpu_indices, args.duration, args.backend)
        else:
            power(
                args.gpu_indices, args.update_period, args.power_domain, args.duration, args.backend
            )
        return 0

    return run_main(PROG, run, argv)
