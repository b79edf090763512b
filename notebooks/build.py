"""Build the notebooks from their percent-format sources in ``src/``.

Each ``src/NN_name.py`` holds cells separated by ``# %%`` lines: ``# %% [markdown]`` starts a
markdown cell (its lines are comments), ``# %% tags=["parameters"]`` a tagged code cell. The
generated ``NN_name.ipynb`` has no outputs and no execution counts, and stable cell ids, so a
rebuild of unchanged sources changes nothing.

    python notebooks/build.py          # rewrite the notebooks
    python notebooks/build.py --check  # exit 1 if a notebook is out of date
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _cells(source: str) -> list[tuple[str, str, list[str]]]:
    """(kind, text, tags) per cell of a percent-format script."""
    cells: list[tuple[str, list[str], list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            header = line[4:].strip()
            kind = "markdown" if header.startswith("[markdown]") else "code"
            tags: list[str] = []
            if "tags=" in header:
                tags = list(ast.literal_eval(header.split("tags=", 1)[1].strip()))
            cells.append((kind, [], tags))
        elif cells:
            cells[-1][1].append(line)
    out = []
    for kind, lines, tags in cells:
        if kind == "markdown":
            lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines]
        text = "\n".join(lines).strip("\n")
        out.append((kind, text, tags))
    return out


def build(src: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
    }
    for i, (kind, text, tags) in enumerate(_cells(src.read_text())):
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        cell = make(text)
        cell.id = f"{src.stem[:2]}-{i:02d}"
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(src: Path) -> str:
    return nbformat.writes(build(src)) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for src in sorted((HERE / "src").glob("[0-9][0-9]_*.py")):
        target = HERE / f"{src.stem}.ipynb"
        text = render(src)
        if target.exists() and target.read_text() == text:
            continue
        stale.append(target.name)
        if not check:
            target.write_text(text)
    if check and stale:
        print(f"out of date (run python notebooks/build.py): {', '.join(stale)}")
        return 1
    for name in stale if not check else []:
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
