#!/usr/bin/env python3
"""Extract the ILSVRC2012 archives into the class-folder layout torchvision's ImageFolder reads.

    python data_scripts/extract_imagenet.py ARCHIVE_DIR [--out DATA_DIR] [--split train|val|all]
    python data_scripts/extract_imagenet.py --verify DATA_DIR

ARCHIVE_DIR holds ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz
(as left by download_imagenet.sh). The result is::

    DATA_DIR/train/n01440764/n01440764_10026.JPEG ...   (one folder per class)
    DATA_DIR/val/n01440764/ILSVRC2012_val_00000293.JPEG ...

The train archive is a tar of per-class tars; the val archive is a flat tar whose labels come from
the devkit (data/ILSVRC2012_validation_ground_truth.txt gives each image's ILSVRC2012_ID, and
data/meta.mat maps IDs to WordNet IDs).

Safe to re-run: a class folder counts as done once its ``.complete`` marker exists (written last,
holding the number of images). Folders without one, left by an interrupted run, are extracted again;
images are written to a temporary name and renamed, so no half-written JPEG is ever left in place.
Needs only the Python standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matv5  # noqa: E402

TRAIN_TAR = "ILSVRC2012_img_train.tar"
VAL_TAR = "ILSVRC2012_img_val.tar"
DEVKIT = "ILSVRC2012_devkit_t12.tar.gz"
MARKER = ".complete"
WNID = re.compile(r"n\d{8}")
VAL_NAME = re.compile(r"ILSVRC2012_val_(\d{8})\.JPEG")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
REDOWNLOAD = (
    "check it with `data_scripts/download_imagenet.sh --verify {dir}` and download it again"
)


class ExtractError(Exception):
    """A problem the user must fix (wrong, missing or truncated archive)."""


def _progress(total: int | None, desc: str):
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="class" if desc == "train" else "img")
    except ImportError:  # the script also runs on a bare data server

        class _Plain:
            def __init__(self):
                self.n = 0

            def update(self, k=1):
                self.n += k
                if self.n % 100 == 0:
                    print(f"{desc}: {self.n}" + (f"/{total}" if total else ""), flush=True)

            def close(self):
                print(f"{desc}: {self.n} done", flush=True)

        return _Plain()


def _open_tar(path: Path, what: str, mode: str = "r:") -> tarfile.TarFile:
    if not path.is_file():
        raise ExtractError(
            f"{path} not found; download it with `data_scripts/download_imagenet.sh BASE_URL "
            f"{path.parent}`"
        )
    try:
        return tarfile.open(path, mode)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ExtractError(
            f"{path} is not a readable {what} ({e}); {REDOWNLOAD.format(dir=path.parent)}"
        ) from None


def _members(tar: tarfile.TarFile, path: Path) -> Iterator[tarfile.TarInfo]:
    """Members of ``tar``, failing loudly where tarfile would silently stop at a cut-off file."""
    try:
        yield from tar
        f = tar.fileobj
        f.seek(tar.offset)
        end = f.read(tarfile.BLOCKSIZE)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ExtractError(
            f"{path} is truncated or corrupt ({e}); {REDOWNLOAD.format(dir=path.parent)}"
        ) from None
    if len(end) < tarfile.BLOCKSIZE or end.strip(b"\0"):
        raise ExtractError(
            f"{path} ends without the tar end-of-archive marker: it is truncated; "
            + REDOWNLOAD.format(dir=path.parent)
        )


def _write_atomic(dest: Path, src, size: int) -> None:
    tmp = dest.with_name(dest.name + ".tmp")
    with tmp.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    if tmp.stat().st_size != size:
        tmp.unlink()
        raise tarfile.ReadError(f"unexpected end of data in {dest.name}")
    os.replace(tmp, dest)


def _mark(folder: Path, count: int) -> None:
    (folder / MARKER).write_text(json.dumps({"images": count}) + "\n")


def _is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def extract_train(archive: Path, out: Path) -> dict[str, int]:
    """Per-class tars -> ``out/train/<wnid>/``; returns {"classes", "extracted", "skipped"}."""
    train = out / "train"
    stats = {"classes": 0, "extracted": 0, "skipped": 0, "repaired": 0}
    with _open_tar(archive, "ILSVRC2012 train archive") as outer:
        train.mkdir(parents=True, exist_ok=True)
        bar = _progress(None, "train")
        for member in _members(outer, archive):
            name = member.name
            if not (member.isfile() and name.endswith(".tar") and WNID.fullmatch(name[:-4])):
                raise ExtractError(
                    f"{archive} contains {name!r}, but the ILSVRC2012 train archive holds only "
                    "per-class tars named like n01440764.tar: is this the right file?"
                )
            wnid = name[:-4]
            dest = train / wnid
            stats["classes"] += 1
            bar.update()
            if _is_complete(dest):
                stats["skipped"] += 1
                continue
            if dest.exists():  # left by an interrupted run
                shutil.rmtree(dest)
                stats["repaired"] += 1
            dest.mkdir()
            count = 0
            try:
                with tarfile.open(fileobj=outer.extractfile(member), mode="r|") as inner:
                    for img in inner:
                        base = os.path.basename(img.name)
                        if not img.isfile() or not base.lower().endswith(IMAGE_SUFFIXES):
                            continue
                        _write_atomic(dest / base, inner.extractfile(img), img.size)
                        count += 1
            except (tarfile.TarError, OSError, EOFError) as e:
                raise ExtractError(
                    f"{archive}: class tar {name} is truncated or corrupt ({e}); "
                    + REDOWNLOAD.format(dir=archive.parent)
                ) from None
            _mark(dest, count)
            stats["extracted"] += 1
    bar.close()
    if stats["classes"] == 0:
        raise ExtractError(
            f"{archive} holds no class tars; {REDOWNLOAD.format(dir=archive.parent)}"
        )
    return stats


def read_devkit(devkit: Path) -> list[str]:
    """WordNet ID of every validation image, in file-number order, from the devkit."""
    meta = truth = None
    with _open_tar(devkit, "ILSVRC2012 devkit", "r:gz") as tar:
        try:
            for m in tar:
                if m.name.endswith("data/meta.mat"):
                    meta = tar.extractfile(m).read()
                elif m.name.endswith("data/ILSVRC2012_validation_ground_truth.txt"):
                    truth = tar.extractfile(m).read().decode()
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ExtractError(
                f"{devkit} is truncated or corrupt ({e}); {REDOWNLOAD.format(dir=devkit.parent)}"
            ) from None
    if meta is None or truth is None:
        raise ExtractError(
            f"{devkit} lacks data/meta.mat or data/ILSVRC2012_validation_ground_truth.txt: it is "
            "not the ILSVRC2012 task 1&2 devkit (ILSVRC2012_devkit_t12.tar.gz)"
        )
    try:
        synsets = matv5.loads(meta)["synsets"]
        wnid_of = {
            int(s["ILSVRC2012_ID"]): s["WNID"]
            for s in synsets
            if int(s["num_children"]) == 0  # leaves are the 1000 classes
        }
    except (matv5.MatFileError, KeyError, TypeError) as e:
        raise ExtractError(f"{devkit}: cannot read data/meta.mat ({e})") from None
    try:
        return [wnid_of[int(line)] for line in truth.split()]
    except (KeyError, ValueError) as e:
        raise ExtractError(f"{devkit}: ground truth names an unknown class ID {e}") from None


def extract_val(archive: Path, devkit: Path, out: Path) -> dict[str, int]:
    """Flat val tar -> ``out/val/<wnid>/``, labelled by the devkit's ground truth."""
    labels = read_devkit(devkit)
    val = out / "val"
    stats = {"images": 0, "extracted": 0, "skipped": 0, "classes": len(set(labels))}
    classes = sorted(set(labels))
    if val.is_dir() and all(_is_complete(val / w) for w in classes):
        stats["skipped"] = sum(
            json.loads((val / w / MARKER).read_text())["images"] for w in classes
        )
        stats["images"] = stats["skipped"]
        return stats
    for w in classes:
        (val / w).mkdir(parents=True, exist_ok=True)
        (val / w / MARKER).unlink(missing_ok=True)
    counts = dict.fromkeys(classes, 0)
    bar = _progress(len(labels), "val")
    with _open_tar(archive, "ILSVRC2012 val archive") as tar:
        try:
            for m in _members(tar, archive):
                match = VAL_NAME.fullmatch(m.name)
                if not (m.isfile() and match):
                    raise ExtractError(
                        f"{archive} contains {m.name!r}, but the ILSVRC2012 val archive holds "
                        "only images named like ILSVRC2012_val_00000001.JPEG: is this the right "
                        "file?"
                    )
                number = int(match.group(1))
                if not 1 <= number <= len(labels):
                    raise ExtractError(
                        f"{archive}: {m.name} has no label in {devkit.name} ({len(labels)} "
                        "labels): the archive and the devkit do not belong together"
                    )
                wnid = labels[number - 1]
                dest = val / wnid / m.name
                counts[wnid] += 1
                stats["images"] += 1
                bar.update()
                if dest.is_file() and dest.stat().st_size == m.size:
                    stats["skipped"] += 1
                    continue
                _write_atomic(dest, tar.extractfile(m), m.size)
                stats["extracted"] += 1
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ExtractError(
                f"{archive} is truncated or corrupt ({e}); {REDOWNLOAD.format(dir=archive.parent)}"
            ) from None
    bar.close()
    if stats["images"] != len(labels):
        raise ExtractError(
            f"{archive} holds {stats['images']} images but {devkit.name} labels {len(labels)}: "
            "the archive and the devkit do not belong together"
        )
    for w in classes:
        _mark(val / w, counts[w])
    return stats


def verify(data: Path) -> list[str]:
    """Problems with an extracted dataset (empty list: train/ and val/ are complete)."""
    problems = []
    for split in ("train", "val"):
        folder = data / split
        if not folder.is_dir():
            problems.append(f"{folder} is missing")
            continue
        classes = sorted(p for p in folder.iterdir() if p.is_dir())
        if not classes:
            problems.append(f"{folder} has no class folders")
        for c in classes:
            marker = c / MARKER
            if not marker.is_file():
                problems.append(f"{c} is incomplete (no {MARKER} marker)")
                continue
            want = json.loads(marker.read_text())["images"]
            have = sum(1 for p in c.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if have != want:
                problems.append(f"{c} has {have} images, expected {want}")
        if split == "train" and classes:
            other = data / "val"
            if other.is_dir():
                extra = {p.name for p in other.iterdir() if p.is_dir()} - {c.name for c in classes}
                if extra:
                    problems.append(f"val has classes missing from train: {sorted(extra)[:5]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Extract ILSVRC2012 archives into train/<wnid>/ and val/<wnid>/ folders.",
    )
    p.add_argument("source", type=Path, help="folder with the archives (or, with --verify, data)")
    p.add_argument("--out", type=Path, help="data folder to create (default: the archive folder)")
    p.add_argument("--split", choices=("train", "val", "all"), default="all")
    p.add_argument("--verify", action="store_true", help="only check an extracted data folder")
    args = p.parse_args(argv)
    try:
        if args.verify:
            problems = verify(args.source)
            for line in problems:
                print(f"problem: {line}", file=sys.stderr)
            if problems:
                print(
                    f"re-run `python {sys.argv[0]} ARCHIVE_DIR --out {args.source}` to repair",
                    file=sys.stderr,
                )
                return 1
            n = {s: len(list((args.source / s).iterdir())) for s in ("train", "val")}
            print(f"ok: {args.source} has {n['train']} train and {n['val']} val class folders")
            return 0
        src = args.source
        out = args.out or src
        if args.split in ("train", "all"):
            s = extract_train(src / TRAIN_TAR, out)
            print(
                f"train: {s['classes']} classes ({s['extracted']} extracted, "
                f"{s['skipped']} already complete, {s['repaired']} partial ones redone)"
            )
        if args.split in ("val", "all"):
            s = extract_val(src / VAL_TAR, src / DEVKIT, out)
            print(
                f"val: {s['images']} images in {s['classes']} classes "
                f"({s['extracted']} extracted, {s['skipped']} already there)"
            )
    except ExtractError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"done; train with e.g. `python -m zeus_nb.train.single --data {out}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
