"""Faults and entry points: a full disk, API arguments, HTTP answers, ``python -m`` entry
points and notebooks (see docs/reliability.md, "The battery")."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from disk_faults import fill, mount_tiny_tmpfs

from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import kinds

REPO = Path(__file__).resolve().parents[1]
LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"
JSON_BAD = [math.nan, math.inf, -1, 1e300, "5", None, True, [1]]


# --- a full disk -----------------------------------------------------------------------------
@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """A folder on a full file system: a 64 KiB tmpfs where this machine lets us mount one
    (root), else every write of ``zeus_nb.utils.files`` fails part-way with ENOSPC."""
    import errno

    from zeus_nb.utils import files

    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = mount_tiny_tmpfs(folder)

    def fill_it() -> None:
        if mounted:
            fill(folder, ".filler")
        else:

            def short(fd: int, data) -> int:
                if len(data) > 1:
                    return os.write(fd, bytes(data[: len(data) // 2]))
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(files, "_write", short)

    try:
        yield folder, fill_it
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def test_atomic_write_on_a_full_disk_leaves_the_old_file_whole(full_disk):
    from zeus_nb.utils.files import atomic_write

    folder, fill = full_disk
    target = folder / "profile.json"
    atomic_write(target, "old contents\n")
    fill()
    with pytest.raises(OSError) as info:
        atomic_write(target, "x" * 200_000)
    assert info.value.filename is not None
    assert target.read_text() == "old contents\n"
    assert sorted(p.name for p in folder.iterdir() if p.name != ".filler") == ["profile.json"]


def test_append_on_a_full_disk_leaves_no_torn_row(full_disk):
    from zeus_nb.utils.files import append_line

    folder, fill = full_disk
    log = folder / "log.csv"
    append_line(log, "a,b")
    fill()
    for i in range(400):
        try:
            append_line(log, f"{i},{'y' * 50}")
        except OSError:
            break
    else:
        pytest.fail("the full disk took every row")
    assert all(line.count(",") == 1 for line in log.read_text().splitlines())
    assert log.read_text().endswith("\n")


def test_a_profile_save_on_a_full_disk_is_a_warning(full_disk, caplog):
    from replay_profiling import profile_on_replayed_log

    folder, fill = full_disk
    fill()
    with caplog.at_level("WARNING"):
        plo = profile_on_replayed_log(folder / "profile.json")
    assert plo.done and plo.optimal_power_limit is not None and "profile.json" in caplog.text
    assert not (folder / "profile.json").exists()


# --- the API and the entry points -------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [{"seed": 1.5}, {"seed": -1}, {"sim_noise": math.nan}, {"backend": "cuda"}, {"quiet": "no"}],
)
def test_notebook_setup_arguments_are_checked(kwargs):
    from zeus_nb.runner.setup import notebook_setup

    with pytest.raises(ZeusNbError, match="notebook_setup." + next(iter(kwargs))):
        notebook_setup(**kwargs)


def test_http_answers_go_through_their_schemas():
    from zeus_nb.inputs.schema import check_record

    for schema, good, key in (
        (kinds.ELECTRICITYMAPS_POINT, {"datetime": "2024-05-01T00:00:00Z",
                                       "carbonIntensity": 400}, "carbonIntensity"),
        (kinds.OPENEI_PERIOD, {"rate": 0.12}, "rate"),
    ):  # fmt: skip
        check_record(good, schema, "answer")
        for bad in JSON_BAD:
            if bad is None:
                continue
            with pytest.raises(ZeusNbError):
                check_record({**good, key: bad}, schema, "answer")


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "zeus_nb.train.single", "--epochs", "0"],
        ["-m", "zeus_nb.train.pipeline", "--pp", "0"],
        ["-m", "zeus_nb", "plo", "replay", "missing.csv"],
    ],
    ids=["train.single", "train.pipeline", "zeus-nb"],
)
def test_python_m_entry_points_print_one_line(argv, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZEUS_NB_BACKEND": "sim"}
    done = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "error:" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_zeus_nb_error_in_a_notebook_is_one_line_and_still_fails_the_cell():
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from zeus_nb.runner.setup import notebook_setup

    del IPython
    shell = InteractiveShell.instance()
    try:
        notebook_setup(backend="sim", quiet=True)
        with pytest.MonkeyPatch.context() as mp:
            shown = []
            mp.setattr(shell, "_showtraceback", lambda etype, value, stb: shown.append(stb))
            result = shell.run_cell(
                "from zeus_nb.errors import InputError\n"
                "raise InputError('x.csv, line 2: bad; fix it')"
            )
        assert isinstance(result.error_in_exec, ZeusNbError)  # the cell still fails
        assert shown == [
            ["InputError: x.csv, line 2: bad; fix it  (ZEUS_NB_DEBUG=1 shows the traceback)"]
        ]
    finally:
        InteractiveShell.clear_instance()
        logger = logging.getLogger("zeus_nb")  # notebook_setup showed the logs on stdout
        for handler in [h for h in logger.handlers if h.get_name() == "zeus_nb.notebook"]:
            logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
