"""What the README and the guides state is true: generated facts, runnable snippets, one story.

The command list, the list of exercise checks and the GPU each notebook simulates are generated
(:mod:`zeus_nb.docsite.facts`); the run times have their own table (``test_runtimes.py``). The
README's Python blocks are executed in order, as a reader pasting them would, and its example
feedback lines are what the checks print.
"""

from __future__ import annotations

import os
import re
import shutil
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

    text = " ".join((REPO / "docs" / "instructors.md").read_text().split())
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


def test_quick_start_says_what_it_downloads_and_where_to_avoid_it():
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    assert "CUDA" in flat and "docs/install.md" in flat
    assert len(section.splitlines()) <= 40, "the Quick start stays short: details go to docs/"


def test_the_install_guide_says_what_the_cpu_only_install_does_either_way():
    text = " ".join((REPO / "docs" / "install.md").read_text().split())
    assert facts.INSTALL_SIZES["cuda"] in text and facts.INSTALL_SIZES["cpu"] in text
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert "**Reachable**" in text and "**Not reachable**" in text
    assert "installs nothing" in text and "`pip config list`" in text  # both unreachable cases
    assert "zeus-nb doctor" in text and "torchvision::nms" in text


def test_the_readme_is_a_five_minute_read():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for page in ("students", "instructors", "gpu", "cluster", "development", "performance"):
        assert f"(docs/{page}.md)" in text and (REPO / "docs" / f"{page}.md").exists(), page
    assert '.venv/bin/python -m pytest -m "not slow and not browser"' in text
    assert ". .venv/bin/activate" in text  # said once: the commands after the Quick start


def test_every_link_to_a_guide_resolves():
    for doc in (README, *sorted((REPO / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name}: {target}"


def test_the_example_feedback_lines_are_what_the_checks_print(monkeypatch):
    from zeus_nb.course import check

    monkeypatch.setenv("ZEUS_NB_CHECKS", "lenient")
    check.use_seed(0)
    students = (REPO / "docs" / "students.md").read_text()
    section = students.split("## Exercises", 1)[1].split("\n## ", 1)[0]
    shown = [" ".join(b.split()) for b in re.findall(r"```text\n(.*?)```", section, re.S)]
    gpu0 = check.judge("average_power", lambda m: m.gpu_energy[0] / m.time if m.time else 0.0)
    off = check.judge("energy_per_step", lambda m, n: m.total_energy / n * 1.02)
    assert shown == [
        f"{check.FAILED_MARK} {gpu0.message}.{check.GOING_ON}",
        f"{check.FAILED_MARK} {off.message}",
    ]


# --- every block of the README and the guides runs, as printed ------------------------------------

# The documents whose every ```bash and ```python block runs here, in order: every README.md and
# every page under docs/ that has such a block, so that a new page cannot escape. Found with git
# (tracked files and untracked ones it does not ignore), else by walking the checkout's own folders.
RUNS = re.compile(r"^```(bash|python)\n", re.M)


def _runnable() -> tuple[str, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.md"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if listed.returncode == 0 and listed.stdout.strip():
        paths = {REPO / line for line in listed.stdout.splitlines()}
    else:
        paths = {*(REPO / "docs").rglob("*.md"), README}
        for folder in ("zeus_nb", "tools", "benchmarks", "data_scripts", "notebooks", "tests"):
            paths.update((REPO / folder).rglob("README.md"))
    pages = [p for p in paths if p.name == "README.md" or p.is_relative_to(REPO / "docs")]
    names = [p.relative_to(REPO).as_posix() for p in pages if p.exists()]
    runnable = [name for name in names if RUNS.search((REPO / name).read_text())]
    return tuple(sorted(runnable, key=lambda name: (name != "README.md", name)))


RUNNABLE = _runnable()


def test_the_runnable_pages_are_found():
    """Every page the reader is pointed to first, and the guides with commands, are among them."""
    assert RUNNABLE[0] == "README.md"
    for page in ("docs/install.md", "docs/students.md", "docs/cluster.md", "docs/course/README.md"):
        assert page in RUNNABLE, page
    assert all(RUNS.search((REPO / page).read_text()) for page in RUNNABLE)


SKIP = re.compile(r"<!-- skip: (?P<why>[^>]*\S)\s*-->\n$")


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, code, why it is skipped or None) of every fenced block, in order."""
    found = []
    for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.S | re.M):
        skip = SKIP.search(text[: m.start()])
        found.append((m.group(1), m.group(2), skip.group("why") if skip else None))
    return found


def test_skip_markers_are_read():
    text = "a\n<!-- skip: needs a GPU -->\n```bash\nx\n```\n\n```python\ny\n```\n"
    assert _blocks(text) == [("bash", "x\n", "needs a GPU"), ("python", "y\n", None)]


SAME_AS = re.compile(r"\bsame as (?P<page>[\w./-]+\.md)\b")


def _commands(code: str) -> list[str]:
    """A block's commands: continuation lines joined, comments and spacing dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    lines = (re.sub(r"\s+#.*$", "", line) for line in joined.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def test_commands_are_read_as_written():
    code = "torchrun -m x \\\n    --epochs 3   # three\n\nzeus-nb doctor\n"
    assert _commands(code) == ["torchrun -m x --epochs 3", "zeus-nb doctor"]


@pytest.mark.parametrize("document", RUNNABLE)
def test_a_block_skipped_as_the_same_as_another_pages_runs_there(document):
    """A block skipped because another page runs the same commands (`<!-- skip: same as
    docs/x.md ... -->`) is only skipped while that page runs each of them, unskipped, in a
    block of the same language: the marker cannot outlive an edit of either page."""
    for language, code, why in _blocks((REPO / document).read_text()):
        m = SAME_AS.search(why or "")
        if m is None:
            continue
        page = REPO / m.group("page")
        assert page.is_file() and page.relative_to(REPO).as_posix() in RUNNABLE, m.group("page")
        ran = {
            command
            for lang, other, skip in _blocks(page.read_text())
            if lang == language and skip is None
            for command in _commands(other)
        }
        missing = [c for c in _commands(code) if c not in ran]
        assert not missing, f"{document}: {m.group('page')} does not run {missing}"


@pytest.mark.parametrize("document", RUNNABLE)
def test_blocks_that_need_what_this_machine_lacks_say_so(document):
    """A GPU, Docker, a new virtual environment, PyTorch's index or a server never runs here
    unmarked: the block carries a marker that says why it is skipped."""
    needs = re.compile(r"--nproc_per_node gpu|^docker |python3 -m venv |download\.pytorch\.org|"
                       r"zeus-nb lab|jupyter lab|/data/imagenet", re.M)  # fmt: skip
    for language, code, why in _blocks((REPO / document).read_text()):
        if language in ("bash", "python") and needs.search(code):
            assert why, f"{document}: this block needs a skip marker:\n{code}"


WORKER = """
import sys, traceback
scope = {"__name__": "__main__"}
for line in sys.stdin:
    try:
        exec(compile(open(line.strip()).read(), line.strip(), "exec"), scope)
        print("\\0ok", flush=True)
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        print("\\0failed", flush=True)
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout (a git repository, so that ruff reads .gitignore) to run in."""
    root = tmp_path_factory.mktemp("docs") / "zeus-nb"
    top = {".git", ".venv", "runs", "site", "dist", "build", "course", "graded", ".cache",
           ".pytest_cache", ".ruff_cache", "zeus-nb-notebooks", "zeus-nb-tour"}  # fmt: skip

    def ignore(folder: str, names: list[str]) -> list[str]:
        skipped = [n for n in names if n == "__pycache__" or n.endswith(".egg-info")]
        return skipped + (sorted(top & set(names)) if Path(folder) == REPO else [])

    shutil.copytree(REPO, root, ignore=ignore)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


# Each document runs its blocks in under a second to a minute (a two-point sweep, a course build, a
# two-process FSDP run, pip --dry-run installs); the longest, one document at a time on an idle
# machine (2026-12-07): docs/data_and_training.md 53 s (three two-rank torchrun jobs, two
# single-process runs), docs/course/README.md 51 s (the full tour, then the slides); inside the
# idle suite, beside its other work, 138 s and 91 s. On a machine 2.5x slower (2026-12-01) the
# course page took 326 s inside the idle suite; beside four busy processes 3x that is near
# 1000 s. The limits only end a block that never returns.
@pytest.mark.slow
@pytest.mark.timeout(3000)
@pytest.mark.parametrize("document", RUNNABLE)
def test_every_block_runs_as_printed(document, checkout, tmp_path):
    """Every ```bash and ```python block of the document, in order, as a reader pasting them after
    the Quick start would: from the checkout's root, with the virtual environment activated (this
    test's own: its bin folder first on PATH), Python blocks in one interpreter. pip runs with
    --dry-run, so no install changes this environment. On the simulated GPU."""
    venv_bin = str(Path(sys.executable).parent)
    # `pip install` as `pip install --dry-run` (not PIP_DRY_RUN: pip's own build environments
    # would inherit it and install no build backend)
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "pip").write_text(
        f'#!/bin/sh\nif [ "$1" = install ]; then shift; set -- install --dry-run "$@"; fi\n'
        f'exec "{sys.executable}" -m pip "$@"\n'
    )
    (shims / "pip").chmod(0o755)
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(shims), venv_bin, os.environ.get("PATH", "")]),
        VIRTUAL_ENV=sys.prefix,
        PYTHONPATH=str(checkout),
        ZEUS_NB_BACKEND="sim",
        MPLBACKEND="Agg",
        # the power-limit state files and the batch-size store the blocks write: not the user's
        ZEUS_NB_STATE_DIR=str(tmp_path / "state"),
    )

    def untracked() -> set[str]:
        return set(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=all"],
                cwd=checkout, capture_output=True, text=True, check=True,
            ).stdout.splitlines()
        )  # fmt: skip

    before = untracked()
    blocks = _blocks((REPO / document).read_text())
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out: list[str] = []
    try:
        for i, (language, code, why) in enumerate(blocks):
            if why or language not in ("bash", "python"):
                continue
            if language == "bash":
                run = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", code],
                    cwd=checkout,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=2400,
                )
                out.append(run.stdout)
                assert run.returncode == 0, (
                    f"{document}, block {i + 1}:\n{code}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
                )
                continue
            path = tmp_path / f"block{i + 1}.py"
            path.write_text(textwrap.dedent(code))
            worker.stdin.write(f"{path}\n")
            worker.stdin.flush()
            lines = []
            for line in worker.stdout:
                if line.startswith("\0"):
                    break
                lines.append(line)
            out.append("".join(lines))
            assert line == "\0ok\n", f"{document}, block {i + 1}:\n{code}\n{''.join(lines)[-3000:]}"
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
    printed = "".join(out)
    if document == "README.md":
        assert re.search(r"epoch 2: \d+\.\d s, \d+ J", printed)  # the example measured
        assert not (checkout / "out.ipynb").exists()
    if document == "docs/students.md":
        assert "not done yet" in printed  # the student's stub, checked
    if document == "docs/instructors.md":  # the files the guide says the sweep writes
        names = re.findall(r"`([^`]+\.ipynb)`", facts.sweep_files_text("sweep-files-measuring"))
        assert names and all((checkout / "runs" / "measuring" / n).exists() for n in names)
    # what the blocks wrote lies outside the checkout or in folders git ignores
    assert untracked() == before, sorted(untracked() - before)
