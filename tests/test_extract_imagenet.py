"""extract_imagenet.py and make_synthetic_imagenet.py, end to end on synthetic archives."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "data_scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = _load("extract_imagenet")
syn = _load("make_synthetic_imagenet")
matv5 = _load("matv5")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    manifest = syn.make(out, classes=3, train_per_class=5, val_per_class=3, image_size=16)
    return out, manifest


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_extraction_reproduces_the_layout(synthetic, tmp_path):
    out, manifest = synthetic
    s = ex.extract_train(out / "archives" / ex.TRAIN_TAR, tmp_path)
    assert s == {"classes": 3, "extracted": 3, "skipped": 0, "repaired": 0}
    v = ex.extract_val(out / "archives" / ex.VAL_TAR, out / "archives" / ex.DEVKIT, tmp_path)
    assert (v["images"], v["classes"], v["extracted"]) == (9, 3, 9)
    # byte-for-byte what the generator wrote directly, labels from the devkit included
    assert _tree(tmp_path) == _tree(out / "imagenet")
    for name, wnid in manifest["val"].items():
        assert (tmp_path / "val" / wnid / name).is_file()
    assert ex.verify(tmp_path) == []


def test_rerun_is_a_no_op_and_repairs_partial_extraction(synthetic, tmp_path):
    out, manifest = synthetic
    arch = out / "archives"
    ex.main([str(arch), "--out", str(tmp_path)])
    w0, w1 = manifest["wnids"][:2]
    # an interrupted run: a class without marker and with a missing image, a stray temp file,
    # and a val image cut short
    (tmp_path / "train" / w0 / ".complete").unlink()
    victim = tmp_path / "train" / w0 / manifest["train"][w0][0]
    victim.unlink()
    (tmp_path / "train" / w0 / "x.JPEG.tmp").write_bytes(b"half")
    val_name, val_wnid = next(iter(manifest["val"].items()))
    (tmp_path / "val" / val_wnid / val_name).write_bytes(b"cut")
    (tmp_path / "val" / val_wnid / ".complete").unlink()
    problems = ex.verify(tmp_path)
    assert any(w0 in p and "incomplete" in p for p in problems)

    s = ex.extract_train(arch / ex.TRAIN_TAR, tmp_path)
    assert (s["extracted"], s["skipped"], s["repaired"]) == (1, 2, 1)
    v = ex.extract_val(arch / ex.VAL_TAR, arch / ex.DEVKIT, tmp_path)
    assert (v["extracted"], v["skipped"]) == (1, 8)
    assert _tree(tmp_path) == _tree(out / "imagenet")
    assert ex.verify(tmp_path) == []
    # and once complete, nothing is rewritten
    assert ex.extract_train(arch / ex.TRAIN_TAR, tmp_path)["extracted"] == 0
    assert ex.extract_val(arch / ex.VAL_TAR, arch / ex.DEVKIT, tmp_path)["extracted"] == 0
    assert w1  # untouched class stayed complete
    assert (tmp_path / "train" / w1 / ".complete").is_file()


@pytest.mark.parametrize("where", ["member_boundary", "inside_member", "header"])
def test_truncated_train_archive_is_reported(synthetic, tmp_path, where):
    out, _ = synthetic
    data = (out / "archives" / ex.TRAIN_TAR).read_bytes()
    import tarfile

    with tarfile.open(out / "archives" / ex.TRAIN_TAR) as t:
        last = t.getmembers()[-1]
    cut = {
        "member_boundary": last.offset,
        "inside_member": last.offset_data + 700,
        "header": last.offset + 100,
    }[where]
    bad = tmp_path / "archives"
    bad.mkdir()
    (bad / ex.TRAIN_TAR).write_bytes(data[:cut])
    with pytest.raises(ex.ExtractError, match="truncated"):
        ex.extract_train(bad / ex.TRAIN_TAR, tmp_path / "data")


def test_wrong_archives_get_clear_errors(synthetic, tmp_path):
    out, _ = synthetic
    arch = out / "archives"
    with pytest.raises(ex.ExtractError, match="right file"):
        ex.extract_train(arch / ex.VAL_TAR, tmp_path)  # val archive given as train
    with pytest.raises(ex.ExtractError, match="right file"):
        ex.extract_val(arch / ex.TRAIN_TAR, arch / ex.DEVKIT, tmp_path)
    with pytest.raises(ex.ExtractError, match="download_imagenet.sh"):
        ex.extract_train(tmp_path / "missing.tar", tmp_path)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ex.ExtractError, match="not a readable"):
        ex.read_devkit(junk)


def test_devkit_labels_follow_meta_mat_ids(synthetic):
    out, manifest = synthetic
    labels = ex.read_devkit(out / "archives" / ex.DEVKIT)
    names = sorted(manifest["val"])
    assert labels == [manifest["val"][n] for n in names]


def test_cli_exit_codes(synthetic, tmp_path):
    out, _ = synthetic
    cli = [sys.executable, str(SCRIPTS / "extract_imagenet.py")]
    r = subprocess.run([*cli, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "error:" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*cli, "--verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1 and "train is missing" in r.stderr
    shutil.copytree(out / "imagenet", tmp_path / "data")
    r = subprocess.run([*cli, "--verify", str(tmp_path / "data")], capture_output=True, text=True)
    assert r.returncode == 0 and "3 train and 3 val" in r.stdout


def test_matv5_round_trip_and_errors():
    value = {
        "s": [
            {"id": 3.0, "name": "abc", "kids": [], "v": [1.0, 2.5]},
            {"id": 1.0, "name": "", "kids": [4.0], "v": [0.0, -1.0]},
        ],
        "x": 7.0,
    }
    for compress in (True, False):
        got = matv5.loads(matv5.dumps(value, compress=compress))
        assert got["x"] == 7.0
        assert got["s"][0] == {"id": 3.0, "name": "abc", "kids": [], "v": [1.0, 2.5]}
        assert got["s"][1]["kids"] == 4.0 and got["s"][1]["name"] == ""
    with pytest.raises(matv5.MatFileError, match="not a MATLAB 5"):
        matv5.loads(b"\0" * 200)
    with pytest.raises(matv5.MatFileError, match="v7.3"):
        matv5.loads(b"MATLAB 7.3 MAT-file".ljust(200, b" "))
    blob = matv5.dumps(value, compress=False)
    with pytest.raises(matv5.MatFileError, match="truncated"):
        matv5.loads(blob[:-30])


def test_synthetic_archives_are_reproducible(tmp_path):
    a = syn.make(tmp_path / "a", classes=2, train_per_class=2, val_per_class=1, layout=False)
    b = syn.make(tmp_path / "b", classes=2, train_per_class=2, val_per_class=1, layout=False)
    assert a["archives"] == b["archives"]
    assert not (tmp_path / "a" / "imagenet").exists()
    with pytest.raises(ValueError):
        syn.make(tmp_path / "c", classes=0)
