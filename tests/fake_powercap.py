"""A fake Linux powercap tree (RAPL zones) in a folder, for tests and benchmarks.

Layout as on Linux: ``<root>/intel-rapl:<N>/{name,energy_uj,max_energy_range_uj}`` per package,
and ``<root>/intel-rapl:<N>/intel-rapl:<N>:<M>/...`` subzones (``core`` and ``dram``).
Point ``ZEUS_NB_POWERCAP_ROOT`` at ``<root>``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_RANGE_UJ = 262_143_328_850  # a typical package max_energy_range_uj
DRAM_RANGE_UJ = 65_712_999_613
WIDTH = 24  # bytes an energy_uj file is written with: a value, a newline and spaces after


def make_tree(root: Path, packages: int = 2, dram: bool = True) -> Path:
    """Create the tree with every counter at 0; returns ``root``."""
    for n in range(packages):
        pkg = root / f"intel-rapl:{n}"
        _zone(pkg, f"package-{n}", PACKAGE_RANGE_UJ)
        _zone(pkg / f"intel-rapl:{n}:0", "core", PACKAGE_RANGE_UJ)
        if dram:
            _zone(pkg / f"intel-rapl:{n}:1", "dram", DRAM_RANGE_UJ)
    return root


def _zone(path: Path, name: str, max_range: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text("0\n")
    (path / "max_energy_range_uj").write_text(f"{max_range}\n")


def zone(root: Path, package: int, sub: int | None = None) -> Path:
    pkg = root / f"intel-rapl:{package}"
    return pkg if sub is None else pkg / f"intel-rapl:{package}:{sub}"


def set_uj(root: Path, package: int, value: int, sub: int | None = None) -> None:
    """Set a counter in place, as the kernel's value changes (a reader keeps its file open), in
    one write of a fixed width: a reader never sees the file empty or half written, as a
    kernel's counter is never seen (a truncating write was, by a poller beside busy processes)."""
    path = zone(root, package, sub) / "energy_uj"
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, f"{value}\n".ljust(WIDTH).encode(), 0)
    finally:
        os.close(fd)


def add_uj(root: Path, package: int, delta: int, sub: int | None = None) -> None:
    """Advance a counter by ``delta`` uJ, wrapping at its range as the hardware does."""
    z = zone(root, package, sub)
    top = int((z / "max_energy_range_uj").read_text())
    now = int((z / "energy_uj").read_text())
    set_uj(root, package, (now + delta) % top, sub)
