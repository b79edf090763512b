"""A ready-made ``train_fn`` for live sweeps of small torchvision models.

:func:`torch_train_fn` trains a fresh model per configuration, one epoch per call, calling
``zeus_nb.step(batch_size=...)`` once per step, and returns the validation accuracy. It runs on
CUDA when torch sees a GPU and on the CPU otherwise; the GPU's time and energy come from whatever
backend is current (a simulated GPU charges the traced cost of each step).

:func:`synthetic_images` is :func:`zeus_nb.data.datasets.synthetic_datasets` as a
(train, validation) pair split 4:1, so a sweep can run where no dataset can be downloaded.

:func:`repeated_to_span` repeats a training set until an epoch lasts a given time (timed with
:func:`epoch_seconds`): on a real GPU, whose energy counter moves every 100 ms or so, a small
model's epoch of a few milliseconds reads 0 J; a longer epoch spans enough counter updates to be
measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zeus_nb import device as zdevice
from zeus_nb.data.datasets import synthetic_datasets
from zeus_nb.errors import InputError
from zeus_nb.train.loaders import accuracy_counts

if TYPE_CHECKING:
    import torch


def synthetic_images(
    num_samples: int = 1280,
    num_classes: int = 10,
    image_size: int = 16,
    noise: float = 2.0,
    seed: int = 0,
):
    """(train, validation) TensorDatasets from :func:`zeus_nb.data.datasets.synthetic_datasets`.

    1/5 of the ``num_samples`` validate. With the defaults, ResNet-18 reaches 90 % validation
    accuracy in about 2 epochs at batch size 32, 3 at 128, and not within 5 at 512: like real
    data, large batches need more epochs.
    """

    if num_samples < 10 or num_classes < 2:
        raise InputError("need at least 10 samples and 2 classes")
    n_val = num_samples // 5
    d = synthetic_datasets(num_classes, num_samples - n_val, n_val, image_size, noise, seed)
    return d.train, d.val


def repeated(data, times: int):
    """``data`` ``times`` over (one epoch then passes over it ``times`` times)."""
    from torch.utils.data import ConcatDataset

    if times < 1:
        raise InputError(f"times must be >= 1, got {times}")
    return data if times == 1 else ConcatDataset([data] * times)


def epoch_seconds(train_fn: Callable[[int, int], float], batch_size: int, clock) -> float:
    """Seconds of ``clock`` the quicker of two epochs of ``train_fn`` takes at ``batch_size``,
    after a first epoch that warms up (it also pays for torch's start-up and the model)."""
    train_fn(batch_size, 0)
    times = []
    for epoch in (1, 2):
        start = clock()
        train_fn(batch_size, epoch)
        times.append(clock() - start)
    return min(times)


def repeated_to_span(
    make_train_fn: Callable[[Any], Callable[[int, int], float]],
    train_data,
    batch_size: int,
    seconds: float,
    clock,
    tries: int = 3,
) -> tuple[Any, int]:
    """(``train_data`` repeated, how many times) so that an epoch at ``batch_size`` lasts
    ``seconds`` or more by ``clock``; ``make_train_fn(data)`` builds a ``train_fn`` over it.

    An epoch also validates and starts its loader, which do not grow with the copies, so the
    copies are timed again (up to ``tries`` times) rather than scaled once; each guess aims 20 %
    beyond ``seconds``, as epochs speed up on a machine whose load falls.
    """
    import math

    copies = 1
    for _ in range(tries):
        data = repeated(train_data, copies)
        took = epoch_seconds(make_train_fn(data), batch_size, clock)
        if took >= seconds:
            return data, copies
        copies = max(copies + 1, math.ceil(copies * 1.2 * seconds / max(took, 1e-6)))
    return repeated(train_data, copies), copies


def torch_train_fn(
    model_fn: Callable[[], torch.nn.Module],
    train_data,
    val_data,
    *,
    optimizer: str = "adadelta",
    lr: float = 1.0,
    seed: int = 0,
    device: str | None = None,
) -> Callable[[int, int], float]:
    """``train_fn(batch_size, epoch) -> validation accuracy`` for live sweeps (``run_sweep``).

    At epoch 0 a fresh model (``model_fn()``) and optimizer (``adadelta``, ``adam``, ``adamw`` or
    ``sgd``, learning rate ``lr``) are made with torch seeded by ``seed``, so every configuration
    starts from the same weights.
    """
    import torch
    from torch.utils.data import DataLoader

    optimizers: dict[str, Any] = {
        "adadelta": torch.optim.Adadelta,
        "adam": torch.optim.Adam,
        "adamw": torch.optim.AdamW,
        "sgd": torch.optim.SGD,
    }
    if optimizer.lower() not in optimizers:
        raise InputError(f"unknown optimizer {optimizer!r}; use one of {', '.join(optimizers)}")
    opt_cls = optimizers[optimizer.lower()]
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    state: dict[str, Any] = {}

    def train_fn(batch_size: int, epoch: int) -> float:
        bs = int(batch_size)
        if epoch == 0 or state.get("batch_size") != bs:
            torch.manual_seed(seed)
            model = model_fn().to(dev)
            state.update(
                batch_size=bs,
                model=model,
                opt=opt_cls(model.parameters(), lr=lr),
                gen=torch.Generator().manual_seed(seed),
            )
        model, opt = state["model"], state["opt"]
        loss_fn = torch.nn.CrossEntropyLoss()
        loader = DataLoader(train_data, batch_size=bs, shuffle=True, generator=state["gen"])
        model.train()
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x.to(dev)), y.to(dev)).backward()
            opt.step()
            zdevice.step(batch_size=bs)
        val = DataLoader(val_data, batch_size=max(bs, 256))
        right, total = accuracy_counts(model, val, dev)
        return right / max(total, 1)

    return train_fn
