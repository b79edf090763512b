"""What the README and the guides state is true: generated facts, runnable snippets, one story.

The command list, the list of exercise checks and the GPU each notebook simulates are generated
(:mod:`zeus_nb.docsite.facts`); the run times have their own table (``test_runtimes.py``). The
README's Python blocks are executed in order, as a reader pasting them would, and its example
feedback lines are what the checks print.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zeus_nb.docsite import facts

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


@pytest.mark.parametrize("document", facts.DOCUMENTS)
def test_generated_facts_are_up_to_date(document):
    text = (REPO / document).read_text()
    assert facts.render(text, REPO) == text, "run: python tools/sync_docs.py"


def test_the_command_list_holds_every_command():
    text = " ".join(facts.commands_text().split())
    for name, subs in facts.commands().items():
        assert (f"`{name} {'|'.join(subs)}`" if subs else f"`{name}`") in text
    for name in ("lab", "notebooks", "docs", "perseus", "course", "doctor"):
        assert f"`{name}" in text
    readme = README.read_text()
    assert facts.commands_text() in readme


def test_the_list_of_checks_holds_every_check():
    from zeus_nb.course.check import EXERCISES

    text = " ".join(README.read_text().split())
    assert f"Each of the {len(EXERCISES)} checks" in text
    assert all(f"`check.{name}`" in text for name in EXERCISES)


def test_the_simulated_gpu_is_said_per_notebook():
    gpus = facts.simulated_gpus(REPO)
    assert gpus["06"] == "V100" and gpus["01"] == "A40"
    docs = " ".join((REPO / "docs" / "notebooks.md").read_text().split())
    assert "NVIDIA V100 in notebook 06" in docs and "simulates an NVIDIA A40 whose" not in docs


def test_students_are_sent_to_the_student_edition():
    docs = (REPO / "docs" / "notebooks.md").read_text()
    section = docs.split("## Students: open and run", 1)[1].split("\n## ", 1)[0]
    first = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip()
    assert first == "zeus-nb lab" and "student edition" in section


def test_the_syllabus_names_every_exercise_by_its_title():
    import nbformat

    from zeus_nb.course.feedback import exercise_title
    from zeus_nb.course.markers import split_source

    syllabus = " ".join((REPO / "docs" / "course" / "syllabus.md").read_text().split())
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and split_source(cell.source)[2]:
                title = exercise_title(nb.cells, i)
                assert f"*{title}*" in syllabus, f"{path.name}: *{title}* not in the syllabus"


def test_quick_start_says_what_it_downloads_and_how_to_avoid_it():
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    assert "5.1 GiB" in flat and "CUDA" in flat
    assert "--index-url https://download.pytorch.org/whl/cpu" in flat
    assert "connection error" in flat  # what happens where that index cannot be reached
    assert "zeus-nb doctor" in flat and "torchvision::nms" in flat


def test_the_example_feedback_lines_are_what_the_checks_print(monkeypatch):
    from zeus_nb.course import check

    monkeypatch.setenv("ZEUS_NB_CHECKS", "lenient")
    check.use_seed(0)
    section = README.read_text().split("### Exercises", 1)[1].split("\n### ", 1)[0]
    shown = [" ".join(b.split()) for b in re.findall(r"```text\n(.*?)```", section, re.S)]
    gpu0 = check.judge("average_power", lambda m: m.gpu_energy[0] / m.time if m.time else 0.0)
    off = check.judge("energy_per_step", lambda m, n: m.total_energy / n * 1.02)
    assert shown == [
        f"{check.FAILED_MARK} {gpu0.message}.{check.GOING_ON}",
        f"{check.FAILED_MARK} {off.message}",
    ]


# --- the README's Python blocks run --------------------------------------------------------------


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)


RUNNER = """
import runpy, sys
for path in sys.argv[1:]:
    print(f"--- {path}", flush=True)
    exec(compile(open(path).read(), path, "exec"), globals())
"""


# 66 s at load average 2 (a two-point sweep of notebook 01, then the blocks); about 4x that at
# load 8 on 2 cores (about 265 s), under half of this limit
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_python_blocks_run_in_order(tmp_path):
    """Every ```python block of the README, in order, in one interpreter on the simulated GPU,
    from an empty folder; a `zeus-nb sweep` command shown before a block runs first, since the
    block reads what it wrote."""
    env = dict(os.environ, ZEUS_NB_BACKEND="sim", MPLBACKEND="Agg", ZEUS_NB_CHECKS="lenient")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    files: list[str] = []
    for language, code in _blocks(README.read_text()):
        if language == "bash" and code.startswith("zeus-nb sweep "):
            args = code.split()[1:]
            run = subprocess.run(
                [sys.executable, "-m", "zeus_nb", *args],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        elif language == "python":
            path = tmp_path / f"block{len(files) + 1}.py"
            path.write_text(textwrap.dedent(code))
            files.append(str(path))
    assert len(files) >= 5
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, *files],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert re.search(r"epoch 2: \d+\.\d s, \d+ J", out)  # the measuring example measured
    assert "not done yet" in out  # the student's stub, checked
