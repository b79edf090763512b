"""``zeus_nb.inputs.jsonschema_formats``: notebooks read without jsonschema's IRI grammar."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]


def _formats(node) -> set[str]:
    """Every ``format`` keyword's value in a JSON schema."""
    if isinstance(node, dict):
        found = {node["format"]} if isinstance(node.get("format"), str) else set()
        return found.union(*(_formats(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_formats(v) for v in node))
    return set()


def test_no_notebook_schema_uses_a_string_format():
    """What hiding the IRI checker could change: nothing, as nbformat's schemas name no format."""
    schemas = sorted(Path(nbformat.__file__).parent.rglob("*.json"))
    assert any(p.name.startswith("nbformat.v4") for p in schemas)
    for path in schemas:
        assert _formats(json.loads(path.read_text())) == set(), path


CHILD = """
import sys
from zeus_nb.inputs import read_ipynb
nb = read_ipynb(sys.argv[1])
print(len(nb.cells), "rfc3987_syntax" in sys.modules, "jsonschema" in sys.modules)
import rfc3987_syntax  # still importable afterwards, as usual
print(rfc3987_syntax.__name__)
"""


def test_a_process_reads_a_notebook_without_building_the_grammar():
    """In a fresh process: the notebook reads (and validates), jsonschema is imported without
    rfc3987_syntax, and a later import of that package works."""
    notebook = next((REPO / "notebooks").glob("01_*.ipynb"))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(notebook)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    cells, rfc, schema = out.stdout.split("\n")[0].split()
    assert int(cells) > 10 and rfc == "False" and schema == "True"
    assert out.stdout.split("\n")[1] == "rfc3987_syntax"
