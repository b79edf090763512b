"""The packages the notebooks need: torch and torchvision as a pair, the imports, their fixes."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from zeus_nb.utils import boundary, stack

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("torch", "vision", "words"),
    [
        ("2.14.1+cu130", "0.29.1+cu130", None),
        ("2.14.1", "0.29.1", None),
        ("2.13.0+cpu", "0.28.0+cpu", None),
        ("2.13.0", "0.28.0+cu126", None),  # PyPI's default build may be any CUDA one
        ("2.13.0+cpu", "0.28.0", "torch is a cpu build, torchvision a default (PyPI) build"),
        ("2.13.0+cpu", "0.29.1", "torchvision 0.28 goes with torch 2.13.0"),
        ("2.14.1", "0.28.0", "torchvision 0.29 goes with torch 2.14.1"),
    ],
)
def test_torch_and_torchvision_must_be_a_pair(torch, vision, words):
    problem = stack.pair_problem(torch, vision)
    if words is None:
        assert problem is None
        return
    assert words in problem and "operator torchvision::nms does not exist" in problem
    assert "-m pip install " in problem and "'torch==" in problem and "torchvision==0." in problem
    if "cpu" in torch + vision:
        assert stack.CPU_INDEX in problem  # the fix stays on the CPU wheels ...
        # ... says it needs PyTorch's index, and gives one that does not
        assert f"needs {stack.CPU_INDEX} to be reachable" in problem
        assert "without that index" in problem and "install torch torchvision" in problem
    else:
        assert "download.pytorch.org" not in problem  # no index a default pair does not need
    assert sys.executable in problem  # the pip of this environment, activated or not


def _mismatched(monkeypatch) -> None:
    versions = {"torch": "2.13.0+cpu", "torchvision": "0.29.1"}
    monkeypatch.setattr(stack, "_version", versions.get)


def test_doctor_reports_a_mismatched_pair_with_its_fix(monkeypatch, capsys):
    from zeus_nb.cli import main

    _mismatched(monkeypatch)
    monkeypatch.setattr(stack, "try_imports", lambda modules, timeout=0: dict.fromkeys(modules))
    assert main(["doctor", "--backend", "sim"]) == 1
    out = capsys.readouterr().out
    assert "torch 2.13.0+cpu, torchvision 0.29.1: do not match" in out
    assert "install --force-reinstall 'torch==2.13.0' 'torchvision==0.28.*' --index-url" in out
    assert "cannot run here yet" in out


def test_doctor_names_a_missing_package_and_how_to_get_it(monkeypatch):
    from zeus_nb.device.doctor import packages_report

    monkeypatch.setattr(stack, "try_imports", lambda modules, timeout=0: dict.fromkeys(modules))
    real = stack.importlib.util.find_spec
    monkeypatch.setattr(
        stack.importlib.util, "find_spec", lambda name: None if name == "lowtime" else real(name)
    )
    report = packages_report()
    [problem] = report.problems
    assert "import lowtime fails" in problem and "notebook 06" in problem
    assert "pip install 'lowtime>=" in problem


@pytest.mark.slow  # imports torch, torchvision and the rest in a subprocess
def test_the_real_packages_import_here():
    found = stack.try_imports(list(stack.COMPILED))
    assert found == dict.fromkeys(stack.COMPILED)


def test_the_fresh_interpreter_runs_once_a_process_until_a_package_changes(monkeypatch, tmp_path):
    """doctor's import check starts an interpreter that imports torch and torchvision (4 s of
    CPU); asked again with the same files installed it answers from the first run, and a
    package reinstalled (its file rewritten) is tried afresh."""
    package = tmp_path / "site-packages" / "zn_pkg_a"
    package.mkdir(parents=True)
    init = package / "__init__.py"
    init.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    monkeypatch.setattr(stack, "_tried", {})
    runs = []
    real_run = stack.subprocess.run

    def counted(*args, **kwargs):
        runs.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(stack.subprocess, "run", counted)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site-packages"))  # the fresh interpreter's
    assert stack.try_imports(["zn_pkg_a"]) == {"zn_pkg_a": None}
    first = stack.try_imports(["zn_pkg_a"])
    first["zn_pkg_a"] = "changed by the caller"  # a copy: the remembered answer stays
    assert stack.try_imports(["zn_pkg_a"]) == {"zn_pkg_a": None}
    assert len(runs) == 1
    init.write_text("raise ImportError('broken by a reinstall')\n")
    os.utime(init, ns=(1, 1))  # a rewrite: another time (and size)
    assert "broken by a reinstall" in stack.try_imports(["zn_pkg_a"])["zn_pkg_a"]
    assert len(runs) == 2


def test_a_broken_torchvision_is_named_not_called_a_bug(monkeypatch, capsys):
    """The error the mismatched pair raises, caught by the boundary: the cause and the fix, exit
    2, never "internal error ... a bug in zeus-nb"."""
    _mismatched(monkeypatch)

    def run(_args):
        raise RuntimeError("operator torchvision::nms does not exist")

    assert boundary.run_main("zeus-nb tour", run, []) == 2
    err = capsys.readouterr().err
    assert "torch 2.13.0+cpu and torchvision 0.29.1 do not match" in err
    assert "internal error" not in err and "bug" not in err


def test_a_package_failing_while_imported_is_named(tmp_path, monkeypatch, capsys):
    package = tmp_path / "site-packages" / "brokenpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise OSError('libbroken.so: cannot open shared file')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))

    def run(_args):
        import brokenpkg  # noqa: F401

    assert boundary.run_main("zeus-nb x", run, []) == 2
    err = capsys.readouterr().err
    assert "importing brokenpkg failed (OSError: libbroken.so" in err and "zeus-nb doctor" in err
    sys.modules.pop("brokenpkg", None)


def test_a_real_bug_is_still_called_one(capsys):
    def run(_args):
        raise ValueError("something inside zeus-nb went wrong")

    assert boundary.run_main("zeus-nb x", run, []) == 3
    assert "internal error" in capsys.readouterr().err


def test_the_list_holds_every_package_the_notebooks_import():
    """Every third-party module a notebook imports is checked by doctor."""
    stdlib = set(sys.stdlib_module_names)
    imported = set()
    for source in (REPO / "notebooks" / "src").glob("[0-9][0-9]_*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = imported - stdlib - {"zeus_nb"}
    assert third_party <= set(stack.NOTEBOOK_IMPORTS), third_party - set(stack.NOTEBOOK_IMPORTS)
