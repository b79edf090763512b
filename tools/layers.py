#!/usr/bin/env python3
"""The package's layers, read from its imports, drawn into docs/architecture.md.

``LAYERS`` assigns every module of ``zeus_nb`` a layer (the longest matching prefix decides);
``import_edges()`` reads every import of a ``zeus_nb`` module from the source (``TYPE_CHECKING``
blocks aside). ``python tools/layers.py --write`` redraws the picture between the markers in
docs/architecture.md from those imports; ``--check`` exits 1 when the picture is stale
(tests/test_architecture.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zeus_nb"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layers:begin (python tools/layers.py --write draws this from the imports) -->"
END = "<!-- layers:end -->"

# (module or package prefix, layer); the longest matching prefix decides.
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
NAMES = [
    "base",
    "input boundary",
    "utilities",
    "data",
    "device",
    "monitor",
    "optimizers",
    "training",
    "running and presenting",
    "entry points",
]


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layer(name: str) -> int:
    best = max((p for p, _ in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def _resolve(target: str, known: dict[str, Path]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def _skipped(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(x) for x in ast.walk(node)}
    return out


def _in_functions(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out |= {id(x) for x in ast.walk(node) if x is not node}
    return out


def import_edges() -> list[tuple[str, str, int, bool]]:
    """(module, imported module, line, inside a function) for every import of a zeus_nb module."""
    known = modules()
    out = []
    for name, path in sorted(known.items()):
        tree = ast.parse(path.read_text(), str(path))
        skip, inner = _skipped(tree), _in_functions(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
                ]
            else:
                continue
            for target in targets:
                if target == "zeus_nb" or target.startswith("zeus_nb."):
                    resolved = _resolve(target, known)
                    if resolved and resolved != name:
                        out.append((name, resolved, node.lineno, id(node) in inner))
    return out


def diagram() -> str:
    """A mermaid picture: one box per layer (its packages and modules), one arrow per pair of
    layers where the upper imports the lower at import time, labelled with how many imports."""
    known = modules()
    members: dict[int, set[str]] = {}
    for name in known:
        if name == "zeus_nb":
            continue
        parts = name.split(".")
        short = parts[1] if len(parts) > 1 else name
        n = layer(name)
        if layer(".".join(parts[:2])) != n:  # a module that sits in another layer than its package
            short = ".".join(parts[1:])
        members.setdefault(n, set()).add(short + ("/" if (PACKAGE / short).is_dir() else ""))
    counts: dict[tuple[int, int], int] = {}
    for a, b, _, inner in import_edges():
        la, lb = layer(a), layer(b)
        if not inner and la != lb and b != "zeus_nb":
            counts[(lb, la)] = counts.get((lb, la), 0) + 1
    lines = ["```mermaid", "flowchart BT"]
    for n in sorted(members):
        text = ", ".join(sorted(members[n]))
        lines.append(f'    L{n}["{n}: {NAMES[n]}<br/>{text}"]')
    for (lo, hi), c in sorted(counts.items()):
        lines.append(f"    L{lo} -->|{c}| L{hi}")
    lines.append("```")
    return "\n".join(lines)


def current_picture(text: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} lacks the markers {BEGIN!r} ... {END!r}")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="redraw the picture in the doc")
    ap.add_argument("--check", action="store_true", help="exit 1 if the picture is stale")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    fresh = diagram()
    if args.write:
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{fresh}\n{END}{rest.split(END, 1)[1]}")
        return 0
    if args.check:
        stale = current_picture(text) != fresh
        if stale:
            print("docs/architecture.md's picture is stale: run python tools/layers.py --write")
        return int(stale)
    print(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
