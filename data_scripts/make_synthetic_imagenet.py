#!/usr/bin/env python3
"""Write a tiny ImageNet look-alike: the extracted layout, and archives shaped like the real ones.

    python data_scripts/make_synthetic_imagenet.py OUT [--classes 4] [--train-per-class 12]
        [--val-per-class 4] [--image-size 32] [--seed 0] [--archives-only | --layout-only]

Creates::

    OUT/archives/ILSVRC2012_img_train.tar       tar of per-class tars (n99000000.tar, ...)
    OUT/archives/ILSVRC2012_img_val.tar         flat ILSVRC2012_val_00000001.JPEG, ...
    OUT/archives/ILSVRC2012_devkit_t12.tar.gz   data/meta.mat + validation ground truth
    OUT/archives/checksums.env                  ZEUS_NB_IMAGENET_*_MD5/_SIZE of the three
    OUT/imagenet/train/<wnid>/*.JPEG, OUT/imagenet/val/<wnid>/*.JPEG

The class IDs (n99000000, ...) are deliberately not real WordNet IDs. As in the official devkit,
class numbers (ILSVRC2012_ID) are not in WordNet-ID order and meta.mat also lists non-leaf synsets,
so extraction is exercised on the same structure. Each class has its own colour, so a small model
learns it within an epoch. Everything is deterministic for a given seed (fixed tar and gzip times),
so checksums are stable. Needs Pillow.
"""

from __future__ import annotations

import argparse
import colorsys
import gzip
import hashlib
import io
import json
import random
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matv5  # noqa: E402

MTIME = 1_335_830_400  # fixed archive timestamps keep checksums reproducible
ARCHIVES = {
    "train": "ILSVRC2012_img_train.tar",
    "val": "ILSVRC2012_img_val.tar",
    "devkit": "ILSVRC2012_devkit_t12.tar.gz",
}


def _jpeg(rng: random.Random, hue: float, size: int) -> bytes:
    from PIL import Image

    r, g, b = (int(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.8, 0.9))
    img = Image.new("RGB", (size, size), (r, g, b))
    px = img.load()
    for _ in range(size * size // 4):  # speckle noise so images differ
        x, y = rng.randrange(size), rng.randrange(size)
        n = rng.randint(-60, 60)
        px[x, y] = tuple(max(0, min(255, v + n)) for v in (r, g, b))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = MTIME
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files.items():
            _add(tar, name, data)
    return buf.getvalue()


def make(
    out: Path,
    classes: int = 4,
    train_per_class: int = 12,
    val_per_class: int = 4,
    image_size: int = 32,
    seed: int = 0,
    archives: bool = True,
    layout: bool = True,
) -> dict:
    """Write the dataset; returns a manifest (wnids, file names, val labels, archive checksums)."""
    if classes < 1 or train_per_class < 1 or val_per_class < 1:
        raise ValueError("--classes, --train-per-class and --val-per-class must be >= 1")
    if image_size < 8:
        raise ValueError("--image-size must be >= 8")
    rng = random.Random(seed)
    wnids = [f"n{99000000 + i:08d}" for i in range(classes)]
    hues = {w: i / classes for i, w in enumerate(wnids)}
    ids = list(range(1, classes + 1))
    rng.shuffle(ids)  # like the official devkit: class numbers are not in WordNet-ID order
    id_of = dict(zip(wnids, ids, strict=True))

    train = {
        w: {f"{w}_{k + 1}.JPEG": _jpeg(rng, hues[w], image_size) for k in range(train_per_class)}
        for w in wnids
    }
    val_labels = [w for w in wnids for _ in range(val_per_class)]
    rng.shuffle(val_labels)
    val = {
        f"ILSVRC2012_val_{i + 1:08d}.JPEG": (w, _jpeg(rng, hues[w], image_size))
        for i, w in enumerate(val_labels)
    }
    manifest: dict = {
        "wnids": wnids,
        "train": {w: sorted(files) for w, files in train.items()},
        "val": {name: w for name, (w, _) in val.items()},
        "archives": {},
    }

    if layout:
        root = out / "imagenet"
        for w, files in train.items():
            _write_class(root / "train" / w, files)
        for w in wnids:
            _write_class(root / "val" / w, {n: d for n, (lw, d) in val.items() if lw == w})

    if archives:
        folder = out / "archives"
        folder.mkdir(parents=True, exist_ok=True)
        outer = {f"{w}.tar": _tar_bytes(files) for w, files in train.items()}
        (folder / ARCHIVES["train"]).write_bytes(_tar_bytes(outer))
        (folder / ARCHIVES["val"]).write_bytes(_tar_bytes({n: d for n, (_, d) in val.items()}))
        (folder / ARCHIVES["devkit"]).write_bytes(_devkit(wnids, id_of, val_labels, train))
        env = []
        for key, name in ARCHIVES.items():
            data = (folder / name).read_bytes()
            md5, size = hashlib.md5(data).hexdigest(), len(data)
            manifest["archives"][key] = {"file": name, "md5": md5, "size": size}
            env += [f"ZEUS_NB_IMAGENET_{key.upper()}_MD5={md5}"]
            env += [f"ZEUS_NB_IMAGENET_{key.upper()}_SIZE={size}"]
        (folder / "checksums.env").write_text("\n".join(env) + "\n")
    return manifest


def _write_class(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    # the same completion marker extract_imagenet.py writes
    (folder / ".complete").write_text(json.dumps({"images": len(files)}) + "\n")


def _devkit(wnids, id_of, val_labels, train) -> bytes:
    n = len(wnids)
    synsets = [
        {
            "ILSVRC2012_ID": float(id_of[w]),
            "WNID": w,
            "words": f"synthetic class {i}",
            "gloss": "a flat colour with speckle noise",
            "num_children": 0.0,
            "children": [],
            "wordnet_height": 0.0,
            "num_train_images": float(len(train[w])),
        }
        for i, w in enumerate(wnids)
    ]
    # non-leaf synsets, as in the official meta.mat, which extraction must skip
    synsets.append(
        {
            "ILSVRC2012_ID": float(n + 1),
            "WNID": "n98000000",
            "words": "synthetic root",
            "gloss": "parent of every synthetic class",
            "num_children": float(n),
            "children": [float(id_of[w]) for w in wnids],
            "wordnet_height": 1.0,
            "num_train_images": float(sum(len(f) for f in train.values())),
        }
    )
    truth = "".join(f"{id_of[w]}\n" for w in val_labels).encode()
    readme = b"Synthetic stand-in for the ILSVRC2012 devkit, written by zeus-nb for tests.\n"
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=MTIME) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        d = tarfile.TarInfo("ILSVRC2012_devkit_t12/data")
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, MTIME
        tar.addfile(d)
        _add(tar, "ILSVRC2012_devkit_t12/readme.txt", readme)
        _add(tar, "ILSVRC2012_devkit_t12/data/meta.mat", matv5.dumps({"synsets": synsets}))
        _add(tar, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", truth)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--train-per-class", type=int, default=12)
    p.add_argument("--val-per-class", type=int, default=4)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    only = p.add_mutually_exclusive_group()
    only.add_argument("--archives-only", action="store_true")
    only.add_argument("--layout-only", action="store_true")
    a = p.parse_args(argv)
    try:
        m = make(
            a.out,
            a.classes,
            a.train_per_class,
            a.val_per_class,
            a.image_size,
            a.seed,
            archives=not a.layout_only,
            layout=not a.archives_only,
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not a.archives_only:
        print(f"dataset: {a.out / 'imagenet'} ({len(m['wnids'])} classes)")
    for info in m["archives"].values():
        print(f"archive: {a.out / 'archives' / info['file']} ({info['size']} bytes, {info['md5']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
