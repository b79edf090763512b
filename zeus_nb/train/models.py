"""Models for the training entry points: a tiny CNN for CPU runs, or any torchvision model."""

from __future__ import annotations

from zeus_nb.errors import InputError


def tiny_cnn(num_classes: int):
    """Two conv blocks and a linear head: trains in seconds on a CPU at 32 px."""
    from torch import nn

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )

    return nn.Sequential(
        block(3, 16),
        block(16, 32),
        nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes)),
    )


def build_model(arch: str, num_classes: int):
    """``"tiny"`` or a torchvision model name (``resnet18``, ``resnet50``...), untrained."""
    if arch == "tiny":
        return tiny_cnn(num_classes)
    import torchvision

    names = torchvision.models.list_models(module=torchvision.models)
    if arch not in names:
        raise InputError(
            f"unknown model {arch!r}; use 'tiny' or a torchvision classification model such as "
            "resnet18, resnet50, mobilenet_v3_small"
        )
    return torchvision.models.get_model(arch, weights=None, num_classes=num_classes)
