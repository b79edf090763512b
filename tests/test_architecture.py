"""The package reads like docs/architecture.md: layers import downward only, no import circles.

Every ``import`` of a ``zeus_nb`` module anywhere in a module (at the top or inside a function,
``TYPE_CHECKING`` blocks aside) is an edge. A module may import its own layer and the layers
below it; the package root ``zeus_nb`` only loads names lazily and counts as the bottom layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zeus_nb"

# (module or package prefix, layer); the longest matching prefix decides. Mirrors the picture in
# docs/architecture.md.
LAYERS = [
    ("zeus_nb", 0),
    ("zeus_nb.errors", 0),
    ("zeus_nb.exception", 0),
    ("zeus_nb.callback", 0),
    ("zeus_nb.data.workloads", 0),  # a table of constants the input schemas name
    ("zeus_nb.inputs", 1),
    ("zeus_nb.utils", 2),
    ("zeus_nb.data", 3),
    ("zeus_nb.device", 4),
    ("zeus_nb.utils.zeusd", 4),  # Zeus's path; Zeus's module raises its device errors too
    ("zeus_nb.monitor", 5),
    ("zeus_nb.metric", 5),
    ("zeus_nb.utils.testing", 5),  # Zeus's path; Zeus's module builds on its ZeusMonitor too
    ("zeus_nb.optimizer", 6),
    ("zeus_nb.tradeoff", 6),
    ("zeus_nb._legacy", 7),
    ("zeus_nb.train", 7),
    ("zeus_nb.profile", 7),
    ("zeus_nb.show_env", 7),
    ("zeus_nb.plots", 8),
    ("zeus_nb.widgets", 8),
    ("zeus_nb.runner", 8),
    ("zeus_nb.course", 9),
    ("zeus_nb.docsite", 9),
    ("zeus_nb.commands", 9),
    ("zeus_nb.cli", 9),
    ("zeus_nb.__main__", 9),
]


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def layer(name: str) -> int:
    best = max((p for p, _ in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def _resolve(target: str, known: dict[str, Path]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def edges() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                if target.startswith("zeus_nb"):
                    resolved = _resolve(target, known)
                    if resolved and resolved != name and resolved != "zeus_nb":
                        graph[name].add(resolved)
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
