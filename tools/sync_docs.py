"""Rewrite the facts the README and the guides state about the package from the package itself.

    python tools/sync_docs.py

The command list, the list of exercise checks and the GPU each notebook simulates
(:mod:`zeus_nb.docsite.facts`), and every statement of the notebooks' run times from the one
run-time table (:mod:`zeus_nb.course.runtimes`; ``benchmarks/bench_tour.py --write-table``
measures the table itself). ``tests/test_docs_facts.py`` and ``tests/test_runtimes.py`` fail
until this has been run after a change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zeus_nb.course import runtimes  # noqa: E402
from zeus_nb.docsite import facts  # noqa: E402


def main() -> int:
    changed = facts.sync(REPO) + runtimes.sync(REPO)
    notebooks = [str(p) for p in changed if p.suffix == ".py"]
    if notebooks:
        subprocess.run([sys.executable, "-m", "jupytext", "--sync", *notebooks], check=True)
    for path in changed:
        print(f"updated {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
