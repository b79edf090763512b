"""zeus_nb.data.datasets: ImageFolder datasets in the extracted layout, synthetic data, errors."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_nb import data

SCRIPTS = Path(__file__).resolve().parents[1] / "data_scripts"


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory) -> Path:
    spec = importlib.util.spec_from_file_location("syn", SCRIPTS / "make_synthetic_imagenet.py")
    syn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(syn)
    out = tmp_path_factory.mktemp("syn")
    syn.make(out, classes=3, train_per_class=4, val_per_class=2, image_size=24, archives=False)
    return out / "imagenet"


def test_imagenet_folder_datasets(imagenet):
    ds = data.imagenet_datasets(imagenet, image_size=16)
    assert ds.classes == sorted(p.name for p in (imagenet / "train").iterdir())
    assert (len(ds.train), len(ds.val), ds.num_classes) == (12, 6, 3)
    x, y = ds.train[0]
    assert tuple(x.shape) == (3, 16, 16) and y == 0
    x, y = ds.val[len(ds.val) - 1]
    assert tuple(x.shape) == (3, 16, 16) and y == 2
    # normalized with the ImageNet statistics: values leave [0, 1]
    assert float(x.min()) < 0.0


def test_missing_folder_names_the_data_scripts(tmp_path):
    with pytest.raises(data.DatasetLayoutError) as e:
        data.check_imagenet_folder(tmp_path / "nope")
    msg = str(e.value)
    assert "download_imagenet.sh" in msg and "extract_imagenet.py" in msg
    assert "--data synthetic" in msg


def test_unextracted_archives_point_to_extraction(tmp_path):
    (tmp_path / "ILSVRC2012_img_val.tar").write_bytes(b"")
    with pytest.raises(data.DatasetLayoutError, match=r"not extracted: run\n.*extract_imagenet"):
        data.check_imagenet_folder(tmp_path)


def test_malformed_layouts(imagenet, tmp_path):
    root = tmp_path / "d"
    shutil.copytree(imagenet, root)
    first = sorted((root / "val").iterdir())[0]
    for f in first.glob("*.JPEG"):
        f.unlink()
    with pytest.raises(data.DatasetLayoutError, match="hold no images.*interrupted"):
        data.check_imagenet_folder(root)
    shutil.rmtree(first)
    with pytest.raises(data.DatasetLayoutError, match="different classes"):
        data.check_imagenet_folder(root)
    shutil.rmtree(root / "val")
    (root / "val").mkdir()
    with pytest.raises(data.DatasetLayoutError, match="no class folders"):
        data.check_imagenet_folder(root)


def test_synthetic_datasets_are_deterministic_and_learnable_shapes():
    a = data.synthetic_datasets(num_classes=4, train_size=20, val_size=8, image_size=8, seed=1)
    b = data.synthetic_datasets(num_classes=4, train_size=20, val_size=8, image_size=8, seed=1)
    assert (len(a.train), len(a.val), a.num_classes) == (20, 8, 4)
    xa, ya = a.train.tensors
    xb, yb = b.train.tensors
    assert xa.equal(xb) and ya.equal(yb)
    assert tuple(xa.shape) == (20, 3, 8, 8) and int(ya.max()) < 4
    with pytest.raises(ValueError):
        data.synthetic_datasets(num_classes=1)
    ds = data.make_datasets("synthetic", num_classes=3, train_size=5, val_size=2)
    assert tuple(ds.train[0][0].shape) == (3, 32, 32)


def test_importing_data_and_train_does_not_import_torch():
    code = (
        "import sys, zeus_nb.data.datasets, zeus_nb.train, zeus_nb.train.common, "
        "zeus_nb.train.launch; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
