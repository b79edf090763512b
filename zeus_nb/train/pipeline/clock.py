"""Per-instruction measurement of a pipeline stage, and the virtual time of simulated GPUs.

Zeus's pipeline frequency optimizer sees training as a stream of *instructions*: each stage runs a
``forward`` and a ``backward`` per microbatch. :class:`InstructionClock` is called at the begin and
end of each one (``on_instruction_begin/end(name)``, Zeus's names). It

- forwards the calls to a frequency optimizer (which sets the GPU's clock for the instruction);
- on a simulated GPU, runs the instruction's work (:mod:`zeus_nb.train.pipeline.cost`) at the
  GPU's current SM clock, which advances its virtual clock by the frequency model's time, after
  first waiting, at blocking power, for the neighbour stage that produces the instruction's input;
- records each instruction's time and energy, and the time and energy spent blocked in between.

Each process has its own simulated GPU and virtual clock, so the dependencies between stages
travel as timestamps: a stage sends the virtual time at which its forward (backward) finished to
the next (previous) stage over a separate gloo group, and the receiver starts no earlier. The
pipeline's own activations and gradients are untouched. At the end of an iteration all ranks meet
at the latest clock (the optimizer step waits for the slowest stage), so every rank measures the
same iteration time, as real synchronous training does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zeus_nb.errors import InputError

INSTRUCTIONS = ("forward", "backward")


@dataclass
class InstructionRecord:
    """Time and energy of instructions and of blocking, summed since the last reset."""

    time: dict[str, float] = field(default_factory=lambda: dict.fromkeys(INSTRUCTIONS, 0.0))
    energy: dict[str, float] = field(default_factory=lambda: dict.fromkeys(INSTRUCTIONS, 0.0))
    count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INSTRUCTIONS, 0))
    blocking_time: float = 0.0
    blocking_energy: float = 0.0

    def mean(self, instruction: str) -> tuple[float, float]:
        """(seconds, joules) of one instruction on average."""
        n = self.count[instruction]
        if n == 0:
            raise InputError(f"no {instruction} instruction was recorded")
        return self.time[instruction] / n, self.energy[instruction] / n


class TimestampLink:
    """Virtual timestamps between neighbouring stages, on a group of their own.

    Forward timestamps flow from stage ``s`` to ``s+1`` and backward ones from ``s+1`` to ``s``:
    one direction per kind, so messages between a pair never mix, and gloo delivers each
    direction in order. Sends are asynchronous and are waited for at the end of the iteration.
    """

    def __init__(self, group, stage: int, num_stages: int):
        import torch.distributed as dist

        self.group = group
        self.stage = stage
        self.num_stages = num_stages
        ranks = dist.get_process_group_ranks(group)
        self._prev = ranks[stage - 1] if stage > 0 else None
        self._next = ranks[stage + 1] if stage + 1 < num_stages else None
        self._pending: list[Any] = []

    def source(self, instruction: str) -> int | None:
        """Global rank whose timestamp gates ``instruction`` here (None: nothing to wait for)."""
        return self._prev if instruction == "forward" else self._next

    def target(self, instruction: str) -> int | None:
        return self._next if instruction == "forward" else self._prev

    def receive(self, instruction: str) -> float | None:
        import torch
        import torch.distributed as dist

        src = self.source(instruction)
        if src is None:
            return None
        buf = torch.zeros(1, dtype=torch.float64)
        dist.recv(buf, src=src, group=self.group)
        return float(buf[0])

    def send(self, instruction: str, t: float) -> None:
        import torch
        import torch.distributed as dist

        dst = self.target(instruction)
        if dst is not None:
            buf = torch.tensor([t], dtype=torch.float64)
            self._pending.append((dist.isend(buf, dst=dst, group=self.group), buf))

    def flush(self) -> None:
        for work, _ in self._pending:
            work.wait()
        self._pending.clear()


class InstructionClock:
    """The per-instruction hooks of one stage (see the module docstring).

    Args:
        system: this process's GPU system (``zeus_nb.device.current()``).
        gpu_index: the GPU this rank drives.
        works: the frequency-model work of the stage's forward and backward on one microbatch
            (simulated GPUs); None on real GPUs, where the work is real.
        link: timestamps to and from the neighbour stages (simulated GPUs, more than one stage).
        optimizer: anything with ``on_instruction_begin/end(name)`` (a frequency optimizer).
    """

    def __init__(self, system, gpu_index: int, works=None, link=None, optimizer=None):
        self.system = system
        self.gpu = system.gpu(gpu_index)
        self.works = works
        self.link = link
        self.optimizer = optimizer
        self.record = InstructionRecord()
        self.trace: list[tuple[str, float, float, float]] = []  # (name, start, end, clock MHz)
        self.keep_trace = False
        self._open: tuple[str, float, float] | None = None
        self._mark = self._read()

    @property
    def simulated(self) -> bool:
        return self.works is not None

    def _read(self) -> tuple[float, float]:
        self.system.sync([self.gpu.index])
        return self.system.clock(), self.gpu.energy()

    def _account_blocking(self) -> tuple[float, float]:
        """Charge the time since the last mark as blocking; return the new mark."""
        now = self._read()
        self.record.blocking_time += now[0] - self._mark[0]
        self.record.blocking_energy += now[1] - self._mark[1]
        self._mark = now
        return now

    def wait_until(self, t: float) -> None:
        """Simulated GPUs: let virtual time pass at blocking power until ``t``."""
        if self.simulated:
            gap = t - self.system.clock()
            if gap > 0:
                self.system.block(gap, [self.gpu.index])

    # --- Zeus's hooks ------------------------------------------------------------------------
    def on_instruction_begin(self, name: str) -> None:
        if name not in INSTRUCTIONS:
            raise InputError(f"unknown instruction {name!r}; use forward or backward")
        if self._open is not None:
            raise RuntimeError(f"{name} began while {self._open[0]} is still running")
        if self.link is not None and self.simulated:
            ready = self.link.receive(name)
            if ready is not None:
                self.wait_until(ready)
        if self.optimizer is not None:
            self.optimizer.on_instruction_begin(name)
        t0, e0 = self._account_blocking()
        self._open = (name, t0, e0)

    def on_instruction_end(self, name: str) -> None:
        if self._open is None or self._open[0] != name:
            raise RuntimeError(f"{name} ended but was not begun")
        clock = self.current_clock(name)
        if self.simulated:
            self.system.run_work(self.works[name], [self.gpu.index])
        _, t0, e0 = self._open
        t1, e1 = self._read()
        self.record.time[name] += t1 - t0
        self.record.energy[name] += e1 - e0
        self.record.count[name] += 1
        if self.keep_trace:
            self.trace.append((name, t0, t1, clock))
        self._mark = (t1, e1)
        self._open = None
        if self.optimizer is not None:
            self.optimizer.on_instruction_end(name)
        if self.link is not None and self.simulated:
            self.link.send(name, t1)

    def current_clock(self, instruction: str = "forward") -> float:
        """The SM clock (MHz) ``instruction`` runs at now (NaN where unknown)."""
        if self.simulated:
            return float(self.gpu.clock_for(self.works[instruction]))
        getter = getattr(self.gpu, "locked_clocks", None)
        locked = getter() if getter is not None else None
        return float(locked[1]) if locked else float("nan")

    def lock_clock(self, mhz: int | None) -> None:
        """Run the following instructions at ``mhz`` (None: unlock, back to the driver)."""
        if mhz is None:
            self.gpu.reset_locked_clocks()
        else:
            self.gpu.set_locked_clocks(mhz, mhz)

    # --- iterations ----------------------------------------------------------------------------
    def end_iteration(self, group=None) -> None:
        """Meet every rank at the slowest one's clock (blocking until then); flush timestamps."""
        if self.link is not None:
            self.link.flush()
        if self.simulated:
            import torch
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                t = torch.tensor([self.system.clock()], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
                self.wait_until(float(t[0]))
        self._account_blocking()

    def reset(self) -> None:
        """Start a new record (e.g. after warm-up steps)."""
        self._account_blocking()
        self.record = InstructionRecord()
        self.trace.clear()


def instrumented_stage(clock: InstructionClock, *args: Any, **kwargs: Any):
    """A ``torch.distributed.pipelining.PipelineStage`` whose instructions call ``clock``'s hooks.

    The schedule runs each microbatch's forward and backward through ``forward_one_chunk`` and
    ``backward_one_chunk``, after the inputs arrived and before the outputs are sent, so those
    two methods are exactly the instructions.
    """
    from torch.distributed.pipelining import PipelineStage

    class InstrumentedStage(PipelineStage):
        def forward_one_chunk(self, *a: Any, **kw: Any):
            clock.on_instruction_begin("forward")
            out = super().forward_one_chunk(*a, **kw)
            clock.on_instruction_end("forward")
            return out

        def backward_one_chunk(self, *a: Any, **kw: Any):
            clock.on_instruction_begin("backward")
            out = super().backward_one_chunk(*a, **kw)
            clock.on_instruction_end("backward")
            return out

    return InstrumentedStage(*args, **kwargs)
