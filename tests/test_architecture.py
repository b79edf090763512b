"""The package reads like docs/architecture.md: layers import downward only, no import circles.

Every ``import`` of a ``zeus_nb`` module anywhere in a module (at the top or inside a function,
``TYPE_CHECKING`` blocks aside) is an edge. A module may import its own layer and the layers
below it; the package root ``zeus_nb`` only loads names lazily and counts as the bottom layer.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zeus_nb"
sys.path.insert(0, str(PACKAGE.parent / "tools"))

import layers  # noqa: E402 (tools/layers.py: LAYERS, the imports and the picture)

LAYERS = layers.LAYERS
modules = layers.modules
layer = layers.layer
_resolve = layers._resolve

# Imports of zeus_nb modules inside functions, each with its reason: an optional or heavy
# dependency that the target loads, or an import that would run in a circle at load time.
# Anything else belongs at the top of the module; a new one fails
# test_imports_inside_functions_say_why until it is listed here (or moved up).
INNER_IMPORTS: dict[tuple[str, str], str] = {
    ("zeus_nb.commands.bso", "zeus_nb.optimizer.batch_size.server.serve"): "the server extra "
    "(FastAPI, SQLAlchemy), only for `zeus-nb bso serve`",
    ("zeus_nb.commands.perseus", "zeus_nb.optimizer.pipeline_frequency"): "scipy (the planner)",
    ("zeus_nb.commands.sweep", "zeus_nb.runner.cluster"): "dask.distributed, only for executors",
    ("zeus_nb.widgets", "zeus_nb.plots.live"): "matplotlib, only when a live plot is drawn",
    ("zeus_nb.course.check", "zeus_nb.widgets"): "ipywidgets' kernel probe, only in a notebook; "
    "tests replace widgets._interactive_kernel",
    ("zeus_nb.course.grade", "zeus_nb.runner.execute"): "papermill/nbclient; the interrupt "
    "tests replace runner.execute.execute",
    ("zeus_nb.course.verify", "zeus_nb.runner.execute"): "as course.grade",
    ("zeus_nb.runner.notebooks", "zeus_nb.runner.execute"): "as course.grade",
    ("zeus_nb.device", "zeus_nb.device.sim"): "circle: the backends import zeus_nb.device when "
    "they load; the chosen one loads on first use",
    ("zeus_nb.device", "zeus_nb.device.gpu.nvidia"): "pynvml, and the same circle as device.sim",
    ("zeus_nb.device", "zeus_nb.device.replay"): "the same circle as device.sim",
    ("zeus_nb.device.base", "zeus_nb.device.cpu.packages"): "circle: RAPL's CPU packages build "
    "on the device interface",
    ("zeus_nb.device.doctor", "zeus_nb.device.gpu.nvidia"): "pynvml, only to probe a real GPU",
    ("zeus_nb.device.doctor", "zeus_nb.utils.stack"): "pip's view of the installed stack; tests "
    "replace utils.stack",
    ("zeus_nb.device.gpu", "zeus_nb.device"): "circle: Zeus's get_gpus() here returns the "
    "package's current system, and zeus_nb.device imports device.gpu",
    ("zeus_nb.device.gpu.access", "zeus_nb.utils.zeusd"): "HTTP (the net extra's httpx), only "
    "when zeusd is configured",
    ("zeus_nb.docsite", "zeus_nb.docsite.apidoc"): "circle: apidoc imports the docsite package",
    ("zeus_nb.docsite", "zeus_nb.runner.paths"): "tests replace runner.paths.source_checkout",
    ("zeus_nb.optimizer.batch_size.client", "zeus_nb.optimizer.batch_size.store_url"): "circle: "
    "store_url loads the batch_size package, whose factory imports this module",
    ("zeus_nb.optimizer.batch_size.optimizer", "zeus_nb.optimizer.batch_size.store_url"): "as "
    "batch_size.client",
    (
        "zeus_nb.optimizer.batch_size.server.serve",
        "zeus_nb.optimizer.batch_size.server.database.db_connection",
    ): "SQLAlchemy, the server extra",
    ("zeus_nb.optimizer.batch_size.server.serve", "zeus_nb.optimizer.batch_size.server.router"): (
        "FastAPI, the server extra"
    ),
    ("zeus_nb.optimizer.batch_size.store_url", "zeus_nb.optimizer.batch_size.sql_store"): (
        "SQLAlchemy, only for postgresql:// stores"
    ),
    (
        "zeus_nb.optimizer.pipeline_frequency.solver",
        "zeus_nb.optimizer.pipeline_frequency.lowtime_backend",
    ): "scipy, and the backend imports the solver back",
    ("zeus_nb.runner.points", "zeus_nb.runner.cluster"): "dask.distributed, only for executors",
    ("zeus_nb.train.pipeline.cost", "zeus_nb.optimizer.pipeline_frequency"): "scipy (the planner)",
    ("zeus_nb.train.pipeline.plan", "zeus_nb.optimizer.pipeline_frequency"): "scipy (the planner)",
    ("zeus_nb.train.pipeline.trainer", "zeus_nb.train.pipeline.profiling"): "scipy, only when a "
    "run profiles",
}


def edges() -> dict[str, set[str]]:
    """Every import of a zeus_nb module, at the top or inside a function (the root aside)."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for a, b, _, _ in layers.import_edges():
        if b != "zeus_nb":
            graph[a].add(b)
    return graph


def test_every_module_has_a_layer():
    assert all(layer(name) >= 0 for name in modules())


def test_no_layer_imports_upward():
    upward = [
        f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
        for a, targets in edges().items()
        for b in targets
        if layer(b) > layer(a)
    ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_circles():
    graph = edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, circles


@pytest.mark.parametrize("limit", [450])
def test_no_module_is_too_long_to_read(limit):
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert not {n: c for n, c in long.items() if c > limit}


def test_top_level_stays_a_few_entry_modules():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 15, flat


def test_imports_inside_functions_say_why():
    inner = {(a, b) for a, b, _, in_function in layers.import_edges() if in_function}
    unlisted = sorted(f"{a} imports {b}" for a, b in inner - set(INNER_IMPORTS))
    assert not unlisted, (
        "an import of a zeus_nb module inside a function: move it to the top of the module, or "
        "list it in INNER_IMPORTS with its reason (an optional or heavy dependency, a circle): "
        + "; ".join(unlisted)
    )
    stale = sorted(f"{a} -> {b}" for a, b in set(INNER_IMPORTS) - inner)
    assert not stale, f"INNER_IMPORTS lists imports that are no longer inside functions: {stale}"
    assert all(len(why.split()) >= 2 for why in INNER_IMPORTS.values())


def test_the_picture_in_architecture_md_is_drawn_from_the_imports():
    text = layers.DOC.read_text()
    assert layers.current_picture(text) == layers.diagram(), (
        "docs/architecture.md's picture is stale: run python tools/layers.py --write"
    )


def test_utils_import_nothing_above_them_but_zeus_mirrors():
    above = sorted(
        f"{a} imports {b}"
        for a, b, _, _ in layers.import_edges()
        if a.startswith("zeus_nb.utils.")
        and layer(a) == layer("zeus_nb.utils")
        and layer(b) > layer(a)
    )
    assert not above, above


def test_boundary_marks_refuse_an_empty_reason():
    from zeus_nb.inputs.api import unchecked_arguments
    from zeus_nb.inputs.registry import environ_read, not_input, system_read

    for mark in (not_input, system_read, environ_read, unchecked_arguments):
        with pytest.raises(ValueError):
            mark("  ")


def test_backends_attach_the_settings_guard_the_interface_does_not_import_it():
    """The GPU interface (device.base) leaves the guard to its backends: each backend's GPU
    names it, and a GPU class without one refuses to change anything (nothing would put the
    change back at exit)."""
    import ast

    from zeus_nb.device.base import GPU
    from zeus_nb.device.gpu.nvidia import NVIDIAGPU
    from zeus_nb.device.guard import SettingsGuard
    from zeus_nb.device.replay import ReplayGPU
    from zeus_nb.device.sim import SimulatedGPU, SimulatedSystem
    from zeus_nb.errors import ZeusNbError

    tree = ast.parse((PACKAGE / "device" / "base.py").read_text())
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for n in ast.walk(block)
    }
    guard_imports = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and "guard" in n.module
    ]
    assert guard_imports and all(id(n) in typing_only for n in guard_imports)  # annotations only
    assert all(c.settings_guard is SettingsGuard for c in (NVIDIAGPU, ReplayGPU, SimulatedGPU))

    class Unguarded(SimulatedGPU):
        settings_guard = None

    system = SimulatedSystem(gpu="a40")
    gpu = Unguarded(system, 0)
    before = gpu.get_power_management_limit()
    with pytest.raises(ZeusNbError, match="no settings_guard"):
        gpu.set_power_management_limit(before - 25_000)
    assert gpu.get_power_management_limit() == before
    assert GPU.settings_guard is None


# Modules that answer some names on first use (PEP 562 ``__getattr__``), each with its reason:
# a package that keeps ``import zeus_nb.x`` light (Zeus's names, loaded when asked for), or a
# value that must be computed when read. Never an alias for a path zeus-nb used to have.
MODULE_GETATTR: dict[str, str] = {
    "zeus_nb": "top-level names load on first use: `import zeus_nb` (each CLI start) loads none",
    "zeus_nb.data": "the dataset names load datasets.py on first use, not with a trace loader",
    "zeus_nb.device": "Zeus's get_gpus, get_cpus, get_soc load their device package on first use",
    "zeus_nb.device.gpu": "the vendor backends (NVML, AMD SMI) load on first use",
    "zeus_nb.device.gpu.nvml": "the NVML names zeus-nb uses, looked up in pynvml at each use, so "
    "an autospec of it (Zeus's tests) mocks a few dozen functions, not nvidia-ml-py's hundreds",
    "zeus_nb.device.soc.apple": "Zeus's zeus_apple_silicon binding, looked up when read (mocked)",
    "zeus_nb.monitor": "each of Zeus's monitor names loads its own module on first use",
    "zeus_nb.optimizer": "Zeus's optimizer names load their package on first use",
    "zeus_nb.optimizer.batch_size": "the simulator's names load the simulator on first use",
    "zeus_nb.optimizer.batch_size.server.database.db_connection": "Zeus's module-level "
    "`sessionmanager`, made from the settings on first use rather than at import",
    "zeus_nb.optimizer.power_limit": "each of Zeus's power_limit names loads its module when used",
    "zeus_nb.train.pipeline": "the trainer's names load the trainer on first use",
}


def test_module_getattrs_say_why():
    """A module-level ``__getattr__`` is listed with its reason; a new one (say, an alias kept for
    a moved name) fails here until it is listed or removed."""
    found = {
        name
        for name, path in modules().items()
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    }
    assert found == set(MODULE_GETATTR), (
        f"unlisted: {sorted(found - set(MODULE_GETATTR))}; "
        f"listed but gone: {sorted(set(MODULE_GETATTR) - found)}"
    )
