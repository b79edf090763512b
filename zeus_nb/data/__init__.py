"""Data: the Zeus measurements shipped with the package, and datasets to train on.

``traces`` loads the NSDI '23 traces in ``zeus_nb/resources`` (and user traces of the same
schema); ``datasets`` builds ImageNet and synthetic image datasets. Names load on first use, so
importing a trace loader does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_DATASETS = (
    "DatasetLayoutError",
    "Datasets",
    "train_transform",
    "val_transform",
    "check_imagenet_folder",
    "imagenet_datasets",
    "synthetic_datasets",
    "make_datasets",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "SYNTHETIC",
    "IMAGE_SUFFIXES",
)


def __getattr__(name: str) -> Any:
    if name not in _DATASETS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.datasets"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DATASETS))
