"""A window pair on microsecond reads counted in CPU instructions, zeus-nb beside Zeus 0.16.

Run: python benchmarks/bench_monitor_instructions.py --zeus DIR [--pairs N]

``bench_monitor.py`` times the pair; on a shared machine that time moves with the load, and the
ratio with it. An instruction count does not: each side runs in a process of its own under
valgrind's callgrind, which counts only inside one call of ``functools.reduce`` that makes
``--pairs`` window pairs (``--toggle-collect``), so the process's start (imports, a few percent
different from one process to the next) is not in the count. A third process makes as many empty
calls, and its count, the loop's own, is taken off both. Both sides run as shipped, their two
counter reads per pair included, on the tests' fake pynvml with its state in memory (zeus-nb's
``energy_reads="auto"``; Zeus with ``sync_execution=False``, since its torch synchronization raises
without CUDA), after 300 pairs of warm-up. Target: zeus-nb at most 0.6x Zeus. A fourth
process makes only the fake's two counter reads per pair: their count is in both sides' and sets
how near 0.6x can come; the line under the result takes it off both (each monitor's own work).
Needs ``valgrind`` (Debian: ``apt-get install valgrind``) and a Python built with its symbols
(``functools_reduce``); Zeus installed apart, as for ``bench_monitor.py``:
``pip install --no-deps --target /tmp/zeus016 zeus==0.16.0``. Takes minutes (valgrind runs
Python about 50x slower).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
WARMUP = 300  # pairs before counting: past energy_reads="auto"'s timed first reads
TARGET = 0.6


def pairs_in_this_process(side: str, pairs: int, zeus_dir: str) -> None:
    """The child: ``pairs`` window pairs of one side's monitor (after the warm-up), inside the
    one ``functools.reduce`` call callgrind counts; side ``none``: as many empty calls; side
    ``reads``: the fake's two counter reads a pair, nothing else."""
    if side == "none":
        functools.reduce(lambda _, __: None, range(pairs), None)
        return
    sys.path.insert(0, str(TESTS / "fake_nvml"))
    import pynvml  # the tests' fake

    state = Path(tempfile.mkdtemp(prefix="bench_instr_")) / "state.json"
    state.write_text(json.dumps(pynvml.default_state(1)))
    os.environ["ZEUS_NB_FAKE_NVML_STATE"] = str(state)
    pynvml.keep_state_in_memory(pynvml.load_state())
    if side == "reads":
        pynvml.nvmlInit()
        read = functools.partial(
            pynvml.nvmlDeviceGetTotalEnergyConsumption, pynvml.nvmlDeviceGetHandleByIndex(0)
        )

        def pair(_=None, __=None) -> None:
            read()
            read()

    else:
        pair, monitor = _monitor_pair(side, pynvml, zeus_dir)
    for _ in range(WARMUP):
        pair()
    if side == "zeus-nb" and monitor._readers:  # auto timed its first reads as slow
        raise SystemExit(
            "zeus-nb chose background counter reads: under valgrind on a busy machine the fake's "
            "reads looked slower than 1 ms; run this on a calmer machine"
        )
    functools.reduce(pair, range(pairs), None)
    shutil.rmtree(state.parent, ignore_errors=True)


def _monitor_pair(side: str, pynvml, zeus_dir: str):
    """(a window pair of ``side``'s monitor on the fake ``pynvml``, that monitor)."""
    if side == "zeus-nb":
        import zeus_nb.device.gpu.nvidia as nvidia
        from zeus_nb import device
        from zeus_nb.monitor import ZeusMonitor

        nvidia.pynvml = pynvml
        device.reset()
        monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], backend="nvml")
        kwargs = {}
    else:
        sys.path.append(zeus_dir)
        import zeus.device.gpu.nvidia as zeus_nvidia
        from zeus.monitor import ZeusMonitor as Zeus

        zeus_nvidia.pynvml = pynvml
        monitor = Zeus(gpu_indices=[0], cpu_indices=[])
        kwargs = {"sync_execution": False}
    begin, end = monitor.begin_window, monitor.end_window

    def pair(_=None, __=None) -> None:
        begin("pair", **kwargs)
        end("pair", **kwargs)

    return pair, monitor


def instructions(side: str, pairs: int, zeus_dir: str) -> int:
    """Instructions callgrind counted inside the child's one ``functools.reduce`` call."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--collect-atstart=no",
         "--toggle-collect=functools_reduce", sys.executable,
         __file__, "--child", side, "--pairs", str(pairs), "--zeus", zeus_dir],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count for {side}:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--zeus", required=True, help="folder Zeus 0.16 was installed into")
    parser.add_argument(
        "--child", choices=["zeus-nb", "zeus", "none", "reads"], help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        pairs_in_this_process(args.child, args.pairs, args.zeus)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    if not (Path(args.zeus) / "zeus").is_dir():
        print(f"no zeus package in {args.zeus}: install Zeus 0.16 there first", file=sys.stderr)
        return 2
    loop = instructions("none", args.pairs, args.zeus)
    if not loop:
        raise SystemExit(
            "callgrind counted nothing inside functools.reduce: this Python has no symbols for it"
        )
    per_pair = {
        side: (instructions(side, args.pairs, args.zeus) - loop) / args.pairs
        for side in ("zeus-nb", "zeus", "reads")
    }
    ratio = per_pair["zeus-nb"] / per_pair["zeus"]
    ours, theirs = (per_pair[side] - per_pair["reads"] for side in ("zeus-nb", "zeus"))
    print(
        f"window pair, 1 GPU, microsecond reads, in instructions ({args.pairs} pairs, the loop's "
        f"own {loop / args.pairs:.0f} a pair taken off): "
        f"zeus-nb {per_pair['zeus-nb'] / 1000:.2f}k, Zeus {per_pair['zeus'] / 1000:.2f}k: "
        f"ratio {ratio:.3f} (target <= {TARGET:g}: "
        f"{'met' if ratio <= TARGET else 'NOT met'})"
    )
    print(
        f"  of which the fake's two counter reads, the same on both sides: "
        f"{per_pair['reads'] / 1000:.2f}k; without them (each monitor's own work): "
        f"zeus-nb {ours / 1000:.2f}k, Zeus {theirs / 1000:.2f}k: {ours / theirs:.3f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
