"""What this environment offers zeus-nb, printed as Zeus's ``show_env`` prints it.

Sections: Python and package versions (zeus-nb, PyTorch, JAX, CuPy, each with or without CUDA),
the GPU backend and its GPUs, CPU energy (RAPL or simulated), SoC counters, and Zeus's daemon.
The device sections are ``zeus-nb doctor``'s (:mod:`zeus_nb.device.doctor`), so both always say
the same thing. Run it with ``python -m zeus_nb.show_env``; it changes nothing.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil

import zeus_nb
from zeus_nb.device import doctor
from zeus_nb.device.soc import ZeusSoCInitError, get_soc
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.registry import environ_read
from zeus_nb.utils import framework
from zeus_nb.utils.zeusd import ZeusdClient, ZeusdConfig

__all__ = ["SECTION_SEPARATOR", "show_env"]

#: A line as wide as the terminal, between sections.
SECTION_SEPARATOR = "-" * shutil.get_terminal_size().columns


def _framework_line(label: str, name: str) -> str:
    """``label: version (with/without CUDA support)``, or ``not available``."""

    check = {
        "torch": framework.torch_is_available,
        "jax": framework.jax_is_available,
        "cupy": framework.cupy_is_available,
    }[name]
    try:
        cuda = " (with CUDA support)" if check() and name != "cupy" else ""
    except RuntimeError:  # installed, but without CUDA (or without a GPU to see)
        cuda = " (without CUDA support)"
    module = framework.MODULE_CACHE.get(name)
    if module is None:
        return f"  {label}: not available"
    return f"  {label}: {getattr(module, '__version__', 'unknown version')}{cuda}"


def _packages() -> list[str]:
    return [
        f"  Python: {platform.python_version()}",
        f"  zeus-nb: {zeus_nb.__version__}",
        _framework_line("PyTorch", "torch"),
        _framework_line("JAX", "jax"),
        _framework_line("CuPy", "cupy"),
    ]


def _indented(report) -> list[str]:
    """A doctor report's lines, then its problems with their fixes."""
    lines = [f"  {line}" for line in report.lines]
    return lines + [f"  problem: {p}" for p in report.problems]


@environ_read("CUDA_VISIBLE_DEVICES, shown as it is")
def _devices() -> tuple[list[str], list[str]]:
    """(GPU section, CPU section) from ``zeus-nb doctor``'s parts."""

    report, system = doctor.system_report()
    gpus = _indented(report)
    if system is None:
        return gpus + ["  No GPUs available."], ["  No CPUs available (no GPU system)."]
    gpus.append(f"  CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '[NOT SET]')}")
    gpus += _indented(doctor.gpu_report(system))
    return gpus, _indented(doctor.cpu_report(system))


def _soc() -> list[str]:
    try:
        soc = get_soc()
    except ZeusSoCInitError as e:
        return ["  No SoC available.", f"  ({e})"]
    return [f"  {type(soc).__name__}: {', '.join(sorted(soc.get_available_metrics()))}"]


def _zeusd() -> list[str]:
    config = ZeusdConfig.from_env()
    if config is None:
        return ["  Not configured (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT is not set)."]
    lines = [
        f"  Endpoint: {config.endpoint} (zeus-nb's own GPU and CPU calls do not go through it)"
    ]
    try:
        with ZeusdClient(config) as client:
            lines += [
                f"  GPUs: {[(gpu.id, gpu.name) for gpu in client.gpus]}",
                f"  CPU IDs: {client.cpu_ids} (DRAM readable: {client.dram_available})",
                f"  Auth required: {client.auth_required}",
                f"  can_read_gpu: {client.can_read_gpu}, can_control_gpu: "
                f"{client.can_control_gpu}, can_read_cpu: {client.can_read_cpu}",
            ]
            if client.auth_error:
                lines.append(f"  Auth error: {client.auth_error}")
            elif client.auth_required:
                lines.append(f"  Granted scopes: {sorted(client.granted_scopes)}")
    except ZeusNbError as e:
        lines.append(f"  Error: {e}")
    return lines


def _section(title: str, lines: list[str]) -> None:
    print(SECTION_SEPARATOR)
    print(f"## {title}\n")
    print("Detected:")
    print("\n".join(lines) + "\n")


def show_env():
    """Print the environment report (Python, packages, GPUs, CPUs, SoC, zeusd) to stdout."""
    gpus, cpus = _devices()
    _section("Package availability and versions", _packages())
    _section("Device availability", gpus)
    _section("CPU availability", cpus)
    _section("SoC availability", _soc())
    _section("Zeusd daemon", _zeusd())
    print(SECTION_SEPARATOR)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="  [%(asctime)s] [%(name)s] %(message)s")
    show_env()
