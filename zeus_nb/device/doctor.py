"""``zeus-nb doctor``: what GPUs this process sees and whether zeus-nb can use them.

It reads only: nothing on any GPU is changed, power limits included. Its parts (the backend,
the GPUs, the CPUs) are also the device sections of :func:`zeus_nb.show_env.show_env`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeus_nb import device
from zeus_nb.device.base import GPUSystem
from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError, ZeusNbError


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    usable: bool = False

    def __str__(self) -> str:
        out = list(self.lines)
        if self.problems:
            out.append("")
            out.append("Problems and fixes:")
            out += [f"  - {p}" for p in self.problems]
        out.append("")
        out.append("zeus-nb is usable." if self.usable else "zeus-nb cannot run here yet.")
        return "\n".join(out)


def _nvml_status() -> str:
    """One line on NVML itself, whichever backend ends up current."""
    from zeus_nb.device.gpu.nvidia import NVIDIAGPUs

    try:
        NVIDIAGPUs()
    except (ZeusNbError, ImportError) as e:
        return f"not usable: {e}"
    return "available"


def _cpu_lines(system, report: Report) -> None:
    """CPU package and DRAM energy support (RAPL, or the simulated CPU); a note, not a blocker."""
    try:
        cpus = system.cpus()
    except CpuEnergyPermissionError as e:
        report.lines.append("CPU energy: RAPL present but not readable")
        report.problems.append(f"CPU energy: {e} (GPU measurement still works)")
        return
    except CpuEnergyError as e:
        report.lines.append(f"CPU energy: not available ({e})")
        return
    report.lines.append(f"CPU energy: yes, {len(cpus)} package(s)")
    for c in cpus:
        dram = "with DRAM" if c.supports_dram() else "no DRAM counter"
        report.lines.append(f"  CPU {c.index}: {c.name} ({dram})")


def system_report(backend: str | None = None) -> tuple[Report, GPUSystem | None]:
    """The backend asked for, NVML's state and the system's facts; None if it cannot start."""
    report = Report()
    name = device.resolve_backend(backend)
    report.lines.append(f"requested backend: {name}")
    report.lines.append(f"NVML: {_nvml_status()}")
    try:
        system = device.current(name)
    except ZeusNbError as e:
        report.problems.append(str(e))
        return report, None
    for key, value in system.info().items():
        report.lines.append(f"{key}: {value}")
    return report, system


def gpu_report(system: GPUSystem) -> Report:
    """Each GPU's name, power limits, energy counter and whether limits may be changed."""
    report = Report()
    report.lines.append(f"GPUs: {len(system.gpus)}")
    for g in system.gpus:
        report.lines.append(f"  GPU {g.index}: {g.name}")
        try:
            lo, hi = g.power_limit_constraints()
            report.lines.append(
                f"    power limit: {g.get_power_limit():g} W "
                f"(min {lo:g} W, max {hi:g} W, default {g.default_power_limit():g} W)"
            )
        except ZeusNbError as e:
            report.problems.append(f"GPU {g.index}: {e}")
        counter = g.supports_energy_counter()
        report.lines.append(
            "    energy counter: "
            + ("yes" if counter else "no (energy is integrated from sampled power)")
        )
        ok, why = g.can_set_power_limit()
        how = f" ({why})" if ok and "zeusd" in why else ""  # not this process itself: say so
        report.lines.append(f"    may change power limits: {'yes' if ok else 'no'}{how}")
        if not ok:
            report.problems.append(f"GPU {g.index}: {why} (measuring still works)")
    return report


def cpu_report(system: GPUSystem) -> Report:
    """CPU package and DRAM energy support of ``system``."""
    report = Report()
    _cpu_lines(system, report)
    return report


def packages_report() -> Report:
    """The Python packages the notebooks import, torch and torchvision as a matching pair
    (:mod:`zeus_nb.utils.stack`): a mismatched pair passes every GPU check, then fails inside
    notebooks 01 and 06."""
    from zeus_nb.utils import stack

    found = stack.check()
    return Report(lines=list(found.lines), problems=list(found.problems))


def diagnose(backend: str | None = None, packages: bool = True) -> Report:
    report, system = system_report(backend)
    if system is None:
        return report
    parts = [gpu_report(system), cpu_report(system)]
    stack = packages_report() if packages else Report()
    for part in (*parts, stack):
        report.lines += part.lines
        report.problems += part.problems
    report.usable = bool(system.gpus) and not stack.problems
    return report
