"""ImageNet datasets for training, and a synthetic stand-in for machines without ImageNet or a GPU.

``imagenet_datasets(root)`` reads the layout ``data_scripts/extract_imagenet.py`` writes
(``root/train/<wnid>/*.JPEG``, ``root/val/<wnid>/*.JPEG``) with torchvision's ``ImageFolder`` and
the standard transforms: RandomResizedCrop + horizontal flip for training, resize + center crop for
validation, both normalized with the ImageNet channel statistics. Class indices follow sorted
WordNet IDs, as in ``torchvision.datasets.ImageNet``.

``synthetic_datasets()`` makes small labelled tensors where every class has its own coarse colour
pattern under Gaussian noise, so a model can actually learn them and accuracy means something in a
seconds-long CPU run. It is the package's one synthetic image generator: the training scripts, the
notebooks and the live sweeps all draw from it.

Importing this module does not import torch; the functions do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError, ZeusNbError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
SYNTHETIC = "synthetic"

_PREPARE = (
    "Prepare it with the data scripts:\n"
    "  data_scripts/download_imagenet.sh BASE_URL ARCHIVE_DIR\n"
    "  python data_scripts/extract_imagenet.py ARCHIVE_DIR --out {root}\n"
    "or try everything on a tiny stand-in first:\n"
    "  python data_scripts/make_synthetic_imagenet.py /tmp/syn   (then use /tmp/syn/imagenet)\n"
    "or pass --data synthetic to train on generated tensors."
)


class DatasetLayoutError(ZeusNbError, ValueError):
    """The data folder is missing or not in the train/<class>/ + val/<class>/ layout."""


@dataclass
class Datasets:
    """A training and a validation dataset sharing ``classes`` (index -> class name)."""

    train: Any
    val: Any
    classes: list[str]

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def train_transform(image_size: int = 224):
    """RandomResizedCrop + flip + normalize: the standard ImageNet training augmentation."""
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def val_transform(image_size: int = 224):
    """Resize the short side to 256/224 of the crop, center-crop, normalize."""
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Resize(round(image_size * 256 / 224)),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def _class_dirs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def check_imagenet_folder(root: str | Path) -> list[str]:
    """The class names if ``root`` holds train/ and val/ class folders, else a clear error."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DatasetLayoutError(
            f"data folder {root} does not exist. " + _PREPARE.format(root=root)
        )
    archives = sorted(p.name for p in root.glob("ILSVRC2012_*.tar*"))
    classes: dict[str, list[str]] = {}
    for split in ("train", "val"):
        folder = root / split
        if not folder.is_dir():
            hint = (
                f"It holds the archives ({', '.join(archives)}) but they are not extracted: run\n"
                f"  python data_scripts/extract_imagenet.py {root}\n"
                if archives
                else _PREPARE.format(root=root)
            )
            raise DatasetLayoutError(f"{root} has no {split}/ folder. " + hint)
        names = _class_dirs(folder)
        if not names:
            raise DatasetLayoutError(
                f"{folder} has no class folders (expected {split}/<wnid>/*.JPEG). "
                + _PREPARE.format(root=root)
            )
        empty = [
            n
            for n in names
            if not any(p.suffix.lower() in IMAGE_SUFFIXES for p in (folder / n).iterdir())
        ]
        if empty:
            raise DatasetLayoutError(
                f"{len(empty)} class folder(s) in {folder} hold no images (first: {empty[0]}); "
                "an extraction was probably interrupted: re-run\n"
                f"  python data_scripts/extract_imagenet.py ARCHIVE_DIR --out {root}\n"
                f"and check with `python data_scripts/extract_imagenet.py --verify {root}`"
            )
        classes[split] = names
    if classes["train"] != classes["val"]:
        only_train = sorted(set(classes["train"]) - set(classes["val"]))
        only_val = sorted(set(classes["val"]) - set(classes["train"]))
        raise DatasetLayoutError(
            f"train/ and val/ in {root} have different classes (only in train: {only_train[:3]}, "
            f"only in val: {only_val[:3]}), so labels would not match. Check it with "
            f"`python data_scripts/extract_imagenet.py --verify {root}`"
        )
    return classes["train"]


def imagenet_datasets(root: str | Path, image_size: int = 224) -> Datasets:
    """ImageFolder datasets of an extracted ImageNet (or any folder in the same layout)."""
    root = Path(root).expanduser()
    classes = check_imagenet_folder(root)  # before the slow torchvision import
    from torchvision.datasets import ImageFolder

    train = ImageFolder(str(root / "train"), transform=train_transform(image_size))
    val = ImageFolder(str(root / "val"), transform=val_transform(image_size))
    return Datasets(train, val, classes)


def synthetic_datasets(
    num_classes: int = 10,
    train_size: int = 2048,
    val_size: int = 128,
    image_size: int = 32,
    noise: float = 0.5,
    seed: int = 0,
) -> Datasets:
    """Generated (image, label) tensors: a class colour pattern + Gaussian noise.

    Each class has a fixed random 3 x 4 x 4 pattern in [-1, 1], upsampled to ``image_size``;
    every sample adds noise of standard deviation ``noise``. Spatial structure (not just a mean
    colour) keeps convolutions honest, and ``noise`` sets how many epochs a model needs, so larger
    batches need more epochs, as on real data. All samples are drawn in one pass, validation first,
    so the same seed gives the same images whatever the split.
    """
    import torch
    from torch.nn.functional import interpolate
    from torch.utils.data import TensorDataset

    if num_classes < 2 or train_size < 1 or val_size < 1 or image_size < 1:
        raise InputError(
            "synthetic data needs num_classes >= 2 and positive train_size, val_size, image_size"
        )
    g = torch.Generator().manual_seed(seed)
    patterns = torch.rand(num_classes, 3, 4, 4, generator=g) * 2 - 1
    patterns = interpolate(patterns, size=(image_size, image_size), mode="nearest")
    n = train_size + val_size
    labels = torch.randint(0, num_classes, (n,), generator=g)
    images = patterns[labels] + noise * torch.randn(n, 3, image_size, image_size, generator=g)
    classes = [f"class{i}" for i in range(num_classes)]
    return Datasets(
        TensorDataset(images[val_size:], labels[val_size:]),
        TensorDataset(images[:val_size], labels[:val_size]),
        classes,
    )


def make_datasets(data: str | Path, image_size: int | None = None, **synthetic: Any) -> Datasets:
    """``"synthetic"`` for generated tensors (32 px), else an ImageNet-layout folder (224 px)."""
    if str(data) == SYNTHETIC:
        return synthetic_datasets(image_size=image_size or 32, **synthetic)
    return imagenet_datasets(data, image_size=image_size or 224)
