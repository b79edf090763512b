"""Packaging: where the notebooks are found, copying them for users, `zeus-nb lab`, the wheel."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb import cli
from zeus_nb.commands import lab
from zeus_nb.commands.notebooks import RECORD, copy_notebooks
from zeus_nb.errors import ZeusNbError
from zeus_nb.runner import paths

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"


def _notebook_text(code: str) -> str:
    """A minimal valid notebook with one code cell (with an id, as nbformat 4.5 requires)."""
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": code, "outputs": []}
    cell["execution_count"] = None
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb)


def _fake_notebooks(folder: Path, names=("01_a", "02_b")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        code = f"def answer():\n    {BEGIN}\n    return {n!r}\n    {END}"
        (folder / f"{n}.ipynb").write_text(_notebook_text(code))
    return folder


def _code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def _expected_cells(path: Path, solutions: bool) -> tuple[list[str], int]:
    """Each code cell of an edition, worked out from the marked source line by line; blocks."""
    out, blocks = [], 0
    for source in _code_cells(path):
        lines, inside = [], False
        for line in source.splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
                blocks += inside
                if inside and not solutions:  # the "your turn" line, indented like the marker
                    lines.append(line.replace(BEGIN, "raise NotImplementedError("))
                continue
            if solutions or not inside:
                lines.append(line)
        out.append(lines)
    return out, blocks


def _assert_edition(copy: Path, shipped: Path, solutions: bool) -> int:
    """``copy`` holds the student (or instructor) edition of ``shipped``; its exercise count."""
    expected, blocks = _expected_cells(shipped, solutions)
    got = _code_cells(copy)
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        have_lines = have.rstrip("\n").splitlines()
        assert len(have_lines) == len(want), (want, have)
        for w, h in zip(want, have_lines, strict=True):
            assert h.startswith(w) if w.lstrip().startswith("raise NotImpl") else h == w
    text = copy.read_text()
    assert BEGIN not in text and END not in text
    assert ("your turn" in text) == (not solutions and blocks > 0)
    return blocks


# --- locating the notebooks ---------------------------------------------------------------------
def test_checkout_uses_its_own_notebooks_from_any_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.source_checkout() == REPO
    assert paths.notebooks_dir() == REPO / "notebooks"


def test_installed_package_uses_the_packaged_copy(monkeypatch, tmp_path):
    site = tmp_path / "site-packages"
    pkg = site / "zeus_nb"
    _fake_notebooks(pkg / paths.PACKAGED_NOTEBOOKS)
    _fake_notebooks(site / "notebooks", ["09_other_project"])  # not a checkout: no pyproject
    monkeypatch.setattr(paths, "PACKAGE_ROOT", pkg)
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.source_checkout() is None
    assert paths.notebooks_dir() == (pkg / paths.PACKAGED_NOTEBOOKS).resolve()


def test_environment_variable_wins_and_a_bad_one_says_so(monkeypatch, tmp_path):
    own = _fake_notebooks(tmp_path / "mine")
    monkeypatch.setenv(paths.ENV_VAR, str(own))
    assert paths.notebooks_dir() == own.resolve()
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(paths.NotebookNotFoundError, match="not a directory"):
        paths.notebooks_dir()


def test_no_notebooks_anywhere_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "PACKAGE_ROOT", tmp_path / "zeus_nb")
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    with pytest.raises(paths.NotebookNotFoundError, match="python -m build"):
        paths.notebooks_dir()


# --- zeus-nb notebooks --------------------------------------------------------------------------
def test_copy_keeps_edited_notebooks_and_updates_unedited_ones(tmp_path):
    src = _fake_notebooks(tmp_path / "shipped")
    dest = tmp_path / "work"
    first = copy_notebooks(dest, source=src)
    assert first.copied == ["01_a.ipynb", "02_b.ipynb"]
    assert _assert_edition(dest / "01_a.ipynb", src / "01_a.ipynb", solutions=False) == 1
    assert "'01_a'" not in (dest / "01_a.ipynb").read_text()  # the answer is not handed out
    assert copy_notebooks(dest, source=src).unchanged == ["01_a.ipynb", "02_b.ipynb"]

    (dest / "01_a.ipynb").write_text("my edits")  # the user edits 01
    (src / "02_b.ipynb").write_text(_notebook_text("print('a newer release')"))  # a release
    again = copy_notebooks(dest, source=src)
    assert again.skipped == ["01_a.ipynb"] and again.updated == ["02_b.ipynb"]
    assert (dest / "01_a.ipynb").read_text() == "my edits"
    assert _code_cells(dest / "02_b.ipynb") == ["print('a newer release')"]

    (src / "01_a.ipynb").write_text(_notebook_text("print('shipped again')"))  # edit survives
    assert copy_notebooks(dest, source=src).skipped == ["01_a.ipynb"]
    forced = copy_notebooks(dest, force=True, source=src)
    assert forced.replaced == ["01_a.ipynb"] and forced.unchanged == ["02_b.ipynb"]
    assert _code_cells(dest / "01_a.ipynb") == ["print('shipped again')"]


def test_solutions_switches_unedited_copies_and_keeps_edited_ones(tmp_path):
    src = _fake_notebooks(tmp_path / "shipped")
    dest = tmp_path / "work"
    copy_notebooks(dest, source=src)
    edited = json.loads((dest / "01_a.ipynb").read_text())
    edited["cells"][0]["source"] = "def answer():\n    return 'mine'"  # a student's answer
    (dest / "01_a.ipynb").write_text(json.dumps(edited))
    report = copy_notebooks(dest, source=src, solutions=True)
    assert report.skipped == ["01_a.ipynb"] and report.updated == ["02_b.ipynb"]
    assert "'mine'" in (dest / "01_a.ipynb").read_text()
    assert _assert_edition(dest / "02_b.ipynb", src / "02_b.ipynb", solutions=True) == 1
    assert "'02_b'" in (dest / "02_b.ipynb").read_text()


def test_a_notebook_that_cannot_be_split_writes_nothing(tmp_path):
    src = _fake_notebooks(tmp_path / "shipped")
    (src / "02_b.ipynb").write_text(_notebook_text(f"{BEGIN}\nx = 1"))  # never closed
    with pytest.raises(ZeusNbError, match="never closed"):
        copy_notebooks(tmp_path / "work", source=src)
    assert not (tmp_path / "work").exists()


def test_a_file_of_unknown_origin_counts_as_edited(tmp_path):
    src = _fake_notebooks(tmp_path / "shipped")
    dest = tmp_path / "work"
    dest.mkdir()
    (dest / "01_a.ipynb").write_text("made by hand, no record")
    assert copy_notebooks(dest, source=src).skipped == ["01_a.ipynb"]
    assert not (dest / RECORD).read_text().count("01_a")


def test_notebooks_command_copies_the_shipped_notebooks_and_reports_skips(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["notebooks"]) == 0
    dest = tmp_path / "zeus-nb-notebooks"
    assert sorted(p.name for p in dest.glob("*.ipynb")) == SHIPPED
    assert "student edition" in capsys.readouterr().out
    blocks = [_assert_edition(dest / n, REPO / "notebooks" / n, solutions=False) for n in SHIPPED]
    assert all(blocks), f"a shipped notebook without an exercise: {blocks} for {SHIPPED}"
    edited = dest / SHIPPED[0]
    edited.write_text("edited")
    assert cli.main(["notebooks"]) == 0
    out = capsys.readouterr().out
    assert f"skipped {Path('zeus-nb-notebooks') / SHIPPED[0]}: you edited it; --force" in out
    assert edited.read_text() == "edited"
    assert cli.main(["notebooks", "--force"]) == 0
    _assert_edition(edited, REPO / "notebooks" / SHIPPED[0], solutions=False)


def test_notebooks_solutions_gives_the_instructor_edition(tmp_path, capsys):
    dest = tmp_path / "teach"
    assert cli.main(["notebooks", str(dest), "--solutions"]) == 0
    assert "instructor edition" in capsys.readouterr().out
    for name in SHIPPED:
        assert _assert_edition(dest / name, REPO / "notebooks" / name, solutions=True)


def test_notebooks_into_a_file_is_an_error(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert cli.main(["notebooks", str(tmp_path / "f")]) == 2
    assert "not a folder" in capsys.readouterr().err


# --- zeus-nb lab --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "folder", "extra"),
    [
        (["lab"], "zeus-nb-notebooks", []),
        (["lab", "mine", "--", "--port", "9999"], "mine", ["--port", "9999"]),
        (["lab", "--solutions", "mine"], "mine", []),
        (["lab", "--", "--no-browser"], "zeus-nb-notebooks", ["--no-browser"]),
    ],
)
def test_lab_copies_then_launches_jupyterlab_in_the_folder(
    tmp_path, monkeypatch, argv, folder, extra
):
    calls = []
    monkeypatch.setattr(lab, "launch", lambda a, cwd: calls.append((a, cwd)) or 0)
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 0
    root = tmp_path / folder
    assert sorted(p.name for p in root.glob("*.ipynb")) == SHIPPED
    solutions = "--solutions" in argv
    for name in SHIPPED:
        _assert_edition(root / name, REPO / "notebooks" / name, solutions=solutions)
    [(args, cwd)] = calls
    assert cwd == root
    assert args[:3] == [sys.executable, "-m", "jupyterlab"]
    root_flag = ["--allow-root"] if lab._as_root() else []
    assert args[3:] == [f"--ServerApp.root_dir={root}", *extra, *root_flag]


@pytest.mark.parametrize("uid", [0, 1000])
def test_lab_passes_allow_root_only_as_root(tmp_path, monkeypatch, uid):
    calls = []
    monkeypatch.setattr(lab, "launch", lambda a, cwd: calls.append(a) or 0)
    monkeypatch.setattr(lab.os, "geteuid", lambda: uid, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lab", "--", "--allow-root"] if uid == 0 else ["lab"]) == 0
    assert cli.main(["lab"]) == 0
    for argv in calls:
        assert argv.count("--allow-root") == (1 if uid == 0 else 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_lab_really_serves_the_copied_notebooks(tmp_path):
    token, port = secrets.token_hex(8), _free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "cfg")
    argv = [sys.executable, "-m", "zeus_nb", "lab", str(tmp_path / "nb"), "--", "--no-browser"]
    argv += ["--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    argv += [f"--IdentityProvider.token={token}"]  # as root, zeus-nb lab adds --allow-root
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                with urllib.request.urlopen(url, timeout=2) as r:
                    listing = json.load(r)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    names = sorted(c["name"] for c in listing["content"] if c["type"] == "notebook")
    assert names == SHIPPED


# --- version and the built distributions --------------------------------------------------------
def test_version_is_written_once(capsys):
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', text, re.M)
    assert 'version = { attr = "zeus_nb.__version__" }' in text
    assert not re.search(r'^version = "', text, re.M)  # no second, literal version
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"zeus-nb {zeus_nb.__version__}"


@pytest.mark.slow
def test_sdist_and_wheel_carry_every_notebook(tmp_path):
    """The wheel is built from the sdist (as `python -m build` does), so the sdist is complete."""
    pytest.importorskip("build")
    run = [sys.executable, "-m", "build", "--no-isolation", "-o", str(tmp_path)]
    done = subprocess.run([*run, str(REPO)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [sdist] = tmp_path.glob("zeus_nb-*.tar.gz")
    [wheel] = tmp_path.glob("zeus_nb-*.whl")
    assert sdist.name == f"zeus_nb-{zeus_nb.__version__}.tar.gz"
    with tarfile.open(sdist) as t:
        in_sdist = {Path(n).name for n in t.getnames() if "/notebooks/" in n}
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    packaged = sorted(Path(n).name for n in names if n.startswith("zeus_nb/_notebooks/"))
    assert packaged == SHIPPED
    assert set(SHIPPED) <= in_sdist
    assert any(n.startswith("zeus_nb/resources/zeus_traces/") for n in names)


# --- optional extras ----------------------------------------------------------------------------
def test_skip_unless_says_what_is_skipped_and_how_to_install(monkeypatch, capsys):
    from zeus_nb.utils import extras

    present = {"accelerate"}
    monkeypatch.setattr(
        extras.importlib.util, "find_spec", lambda m: object() if m in present else None
    )
    reason = extras.skip_unless("hf", "the Hugging Face section")
    assert reason == "needs transformers: pip install 'zeus-nb[hf]'"
    assert capsys.readouterr().out == f"Skipping the Hugging Face section: it {reason}\n"
    present.add("transformers")
    assert extras.skip_unless("hf", "the Hugging Face section") is None
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="unknown extra 'gpu'"):
        extras.missing("gpu")


def test_extras_match_pyproject():
    from zeus_nb.utils.extras import EXTRAS

    text = (REPO / "pyproject.toml").read_text()
    for extra, modules in EXTRAS.items():
        line = re.search(rf"^{extra} = \[(.*)\]$", text, re.M)
        assert line, f"no [{extra}] extra in pyproject.toml"
        packages = re.findall(r'"([A-Za-z0-9_.-]+)', line.group(1))
        assert sorted(packages) == sorted(modules)
