"""The one setup call at the top of every notebook.

``notebook_setup(backend=..., seed=...)`` picks the GPU backend the way every notebook does,
seeds torch (when installed), shows INFO log lines of the ``zeus_nb`` loggers in the cell
output, and prints one line saying which GPU the notebook measures, so a reader without a GPU
knows the numbers come from the simulator.
"""

from __future__ import annotations

import contextlib
import html
import logging
import math
import sys
from collections.abc import Iterator

from zeus_nb import device
from zeus_nb.device.base import GPUSystem
from zeus_nb.device.sim_wall import own_time
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import NOTEBOOK_SETUP
from zeus_nb.runner.records import set_gpu_source
from zeus_nb.utils.boundary import debug_requested, one_line
from zeus_nb.utils.threads import use_threads

_HANDLER_NAME = "zeus_nb.notebook"


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is at the time: the output of the running cell."""

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _value) -> None:
        pass


_seed = 0  # the seed of the last notebook_setup() in this process


def notebook_seed() -> int:
    """The seed the notebook set up with (0 before any setup): exercise cases draw from it."""
    return _seed


def show_logs(level: int = logging.INFO) -> None:
    """Print ``zeus_nb`` log records at ``level`` and above to stdout (the cell's output).

    Calling it again changes the level; it never adds a second handler.
    """
    logger = logging.getLogger("zeus_nb")
    logger.setLevel(level)
    handler = next((h for h in logger.handlers if h.get_name() == _HANDLER_NAME), None)
    if handler is None:
        handler = _StdoutHandler()
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
    handler.setLevel(level)


class _Collect(logging.Handler):
    """Keeps the records it sees, so a notice can be shown as part of one friendly line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _collect_warnings() -> Iterator[list[str]]:
    """Collect ``zeus_nb`` warnings instead of letting Python print them to stderr."""
    logger = logging.getLogger("zeus_nb")
    handler = _Collect()
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def show_notice(text: str) -> None:
    """One styled line in a notebook (plain text elsewhere): information, not an error box."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or getattr(get_ipython(), "kernel", None) is None:
        print(text)
        return
    from IPython.display import display

    style = (
        "padding:4px 8px;border-left:4px solid #1565c0;background:#e3f2fd;color:#0d47a1;"
        "font-family:sans-serif"
    )
    body = f'<div style="{style}">{html.escape(text)}</div>'
    display({"text/plain": text, "text/html": body}, raw=True)


def _one_line_errors() -> None:
    """In a notebook, our errors show as one line (what is wrong, what to do) rather than a
    traceback through zeus-nb's internals; the cell still fails, so papermill and "Run all"
    stop there. ``ZEUS_NB_DEBUG=1`` keeps the traceback."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or debug_requested([])[0]:
        return

    def show(self, etype, value, tb, tb_offset=None):
        stb = [f"{etype.__name__}: {one_line(value)}  (ZEUS_NB_DEBUG=1 shows the traceback)"]
        self._showtraceback(etype, value, stb)  # still an error: "Run all" and papermill stop
        return stb

    shell.set_custom_exc((ZeusNbError,), show)


# matplotlib's backends that only write files (its non-interactive built-ins)
FILE_BACKENDS = frozenset({"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"})


def _inline_figures() -> None:
    """In a Jupyter kernel, figures show as images even when the environment JupyterLab started
    from names a non-interactive matplotlib backend (``MPLBACKEND=Agg``): with it, a figure a
    widget displays would print as ``<Figure size 900x300 with 2 Axes>``. The kernel's inline
    backend shows it (and papermill keeps it as a PNG output); an interactive backend a person
    chose (``%matplotlib widget``) is left alone."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return  # a plain Python process or a terminal IPython: its backend is the person's
    import matplotlib

    if matplotlib.get_backend().lower() in FILE_BACKENDS:
        shell.run_line_magic("matplotlib", "inline")


def describe(system: GPUSystem) -> str:
    """One friendly line about the backend ``system`` measures."""
    names = sorted({g.name for g in system.gpus})
    count = f"{len(system.gpus)} x " if len(system.gpus) > 1 else ""
    gpus = f"{count}{', '.join(names)}"
    if system.backend == "sim":
        said = all("simulated" in n.lower() for n in names)  # "NVIDIA A40 (simulated)"
        return (
            f"GPU backend: {'' if said else 'simulated '}{gpus} (time and power per step come "
            "from real Zeus measurements; no GPU needed)"
        )
    return f"GPU backend: {system.backend}, measuring {gpus}"


def counter_period(system: GPUSystem) -> float:
    """Seconds between updates of ``system``'s energy counters; 0 where the counter is exact.

    A real GPU's counter moves in steps (every 100 ms on an H100): a window spanning few of
    them reads 0 J or whole updates. Notebooks size the windows their claims rest on by it.
    """
    period = system.energy_update_period
    return float(period) if math.isfinite(period) else 0.0


def sizing_clock() -> float:
    """Seconds to size work by where a counter period is the unit (notebooks 02 to 04 on real
    GPUs): real time less the time this process waited for a CPU, so other processes' load does
    not stretch the windows by its waits (what it does to the CPU itself stays: notebooks size
    windows for twice the counter updates they need, for that and for a pace that changes)."""
    return own_time()


def steps_spanning(seconds: float, step_s: float, at_least: int = 1) -> int:
    """How many steps of ``step_s`` s fill ``seconds`` (at least ``at_least``)."""
    if seconds <= 0 or step_s <= 0:
        return at_least
    return max(at_least, math.ceil(seconds / step_s))


def notebook_setup(
    backend: str = "auto",
    seed: int = 0,
    sim_gpu: str = "a40",
    sim_workload: str = "cifar100",
    sim_noise: float = 0.0,
    quiet: bool = False,
    threads: int | None = None,
) -> GPUSystem:
    """Pick the backend, seed torch, set its CPU threads, show INFO logs; returns the GPU system.

    ``backend="auto"`` lets ``ZEUS_NB_BACKEND`` decide, else finds a real GPU (NVML), else
    simulates one. A simulated backend is configured afresh as ``sim_gpu`` running
    ``sim_workload`` with ``sim_noise`` relative step noise, seeded with ``seed``.
    ``threads`` sets torch's intra-op threads; by default ``OMP_NUM_THREADS`` if you set it,
    else the count for a small model (one thread: see :mod:`zeus_nb.utils.threads`), which
    keeps the notebooks' tiny models fast on a machine other work shares.
    """
    args = check_record(
        {
            "backend": backend,
            "seed": seed,
            "sim_gpu": sim_gpu,
            "sim_workload": sim_workload,
            "sim_noise": sim_noise,
            "quiet": quiet,
        },
        NOTEBOOK_SETUP,
        "notebook_setup",
    )  # every argument checked first: a notebook parameter typo is one clear line
    backend, seed, sim_noise = args["backend"], args["seed"], args["sim_noise"]
    with _collect_warnings() as notices:  # "no NVIDIA driver": part of the line below
        system = device.current(None if backend == "auto" else backend)
    if system.backend == "sim":
        system = device.use_simulated(
            gpu=sim_gpu, workload=sim_workload, noise=sim_noise, seed=seed
        )
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.manual_seed(seed)
        use_threads(threads)
    global _seed
    _seed = int(seed)  # the exercises' random cases follow the notebook's seed
    set_gpu_source(f"{'simulated' if system.backend == 'sim' else 'real'}: {system.gpus[0].name}")
    show_logs()
    _one_line_errors()
    _inline_figures()
    if not quiet:
        why = f" ({'; '.join(m.split(';')[0] for m in notices)})" if notices else ""
        show_notice(describe(system) + why)
    return system
