"""What one training run needs: :class:`TrainConfig`, its command line, the slowdown factor."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, fields
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.args import Parser, count, nonempty, only_with, real
from zeus_nb.inputs.env import env
from zeus_nb.inputs.validate import Quantity, number
from zeus_nb.optimizer.power_limit.states import steps_to_profile

DEFAULT_MAX_SLOWDOWN = 1.1


@dataclass
class TrainConfig:
    """Everything one training run needs; the command-line flags map onto these fields."""

    data: str = "synthetic"  # ImageNet-layout folder, or "synthetic"
    arch: str = "tiny"  # "tiny" or a torchvision model name
    epochs: int = 2
    batch_size: int = 32  # per process
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_step_epochs: int = 30  # StepLR: divide the learning rate by 10 every this many epochs
    image_size: int | None = None  # default 224 for folders, 32 for synthetic
    workers: int | None = None  # DataLoader workers; default 0 (synthetic) or up to 8 (folders)
    max_steps_per_epoch: int | None = None  # cap for quick runs
    num_classes: int = 10  # synthetic data only
    train_size: int = 2048  # synthetic data only
    val_size: int = 128  # synthetic data only
    backend: str | None = None  # zeus-nb device backend: auto, sim or nvml
    device: str = "auto"  # torch device: auto (CUDA where each process has a GPU), cuda or cpu
    gpu: int = 0  # GPU index of a single-process run
    power_limit_optimizer: bool = True
    adaptive: bool = True  # skip power limits that cannot win (False: profile every one)
    max_slowdown: float | None = None  # default: ZEUS_MAX_SLOWDOWN / ZEUS_NB_MAX_SLOWDOWN, else 1.1
    wait_steps: int = 1
    warmup_steps: int = 10
    profile_steps: int = 40
    pl_step: int = 25
    profile_path: str | None = None
    results: str | None = None  # default runs/train_<mode>.json
    seed: int = 0
    progress: bool = True
    threads: int | None = None  # torch CPU threads; default OMP_NUM_THREADS, else by model size

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "profile_steps", "lr_step_epochs"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_steps_per_epoch is not None and self.max_steps_per_epoch < 1:
            raise InputError("max_steps_per_epoch must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"threads must be >= 1, got {self.threads}")
        if self.device not in ("auto", "cuda", "cpu"):
            raise InputError(f"device must be auto, cuda or cpu, got {self.device!r}")


# A run allowed to take 100x longer has no time budget at all; such a value is a typo.
SLOWDOWN = Quantity("maximum slowdown factor", "", 1.0, 100.0)
_SLOWDOWN_FIX = "use e.g. 1.1 (10% slower at most)"

#: Environment variables of the slowdown factor: Zeus's name (seed examples set it) and ours.
SLOWDOWN_VARS = ("ZEUS_MAX_SLOWDOWN", "ZEUS_NB_MAX_SLOWDOWN")


def _slowdown_from_env() -> float | None:
    """The factor set by ``ZEUS_MAX_SLOWDOWN`` or its alias ``ZEUS_NB_MAX_SLOWDOWN`` (None: unset).

    Both may be set if they agree; different values are an error rather than a silent pick.
    """
    found: dict[str, float] = {}
    for name in SLOWDOWN_VARS:
        # declared in zeus_nb.inputs.env: inf or nan would lift the time budget
        value = env(name)
        if value is not None:
            found[name] = value
    if len(set(found.values())) > 1:
        a, b = SLOWDOWN_VARS
        raise InputError(
            f"{a}={found[a]:g} and {b}={found[b]:g} disagree; they name the same setting, so "
            f"unset one of them (zeus-nb reads both; {a} is Zeus's name)"
        )
    return next(iter(found.values()), None)


def max_slowdown_factor(value: float | None = None) -> float:
    """The slowdown factor: ``value``, else ``ZEUS_MAX_SLOWDOWN`` / ``ZEUS_NB_MAX_SLOWDOWN``
    (the same setting under Zeus's name and ours), else 1.1."""
    if value is None:
        value = _slowdown_from_env()
        if value is None:
            return DEFAULT_MAX_SLOWDOWN
    value = number(value, "the maximum slowdown factor", fix=_SLOWDOWN_FIX, text_ok=False)
    if not value >= 1.0:
        raise InputError(f"the maximum slowdown factor must be >= 1.0 (1.0 = none), got {value}")
    return number(value, "the maximum slowdown factor", SLOWDOWN, _SLOWDOWN_FIX)


def steps_per_epoch(config: TrainConfig, world_size: int) -> int:
    """Training steps of one rank per epoch on synthetic data (DistributedSampler's share,
    batches not dropped, at most ``max_steps_per_epoch``)."""
    share = math.ceil(config.train_size / world_size)
    steps = math.ceil(share / config.batch_size)
    cap = config.max_steps_per_epoch
    return steps if cap is None else min(steps, cap)


def train_size_to_profile(
    config: TrainConfig, world_size: int, min_limit: float, max_limit: float
) -> int:
    """The least synthetic ``train_size`` (at least ``config.train_size``) whose run has steps
    enough for the power-limit optimizer to measure every limit and choose, adaptive or not.

    Work is sized in steps, never in seconds: the same run on a busy machine profiles the same
    limits (an adaptive descent stops early on some measurements; this does not count on it).
    """
    needed = steps_to_profile(
        min_limit,
        max_limit,
        config.pl_step,
        config.wait_steps,
        config.warmup_steps,
        config.profile_steps,
    )
    per_epoch = math.ceil(needed / config.epochs)
    return max(config.train_size, per_epoch * config.batch_size * world_size)


def with_overrides(config: TrainConfig | None, overrides: dict[str, Any]) -> TrainConfig | None:
    """``config`` with some fields replaced (keyword arguments of the modules' ``train``)."""
    if not overrides:
        return config
    base = vars(config).copy() if config is not None else {}
    return TrainConfig(**{**base, **overrides})


LAUNCH_COMMANDS = {
    "single": "python -m zeus_nb.train.single",
    "dp": "torchrun --nproc_per_node N -m zeus_nb.train.dp",
    "fsdp": "torchrun --nproc_per_node N -m zeus_nb.train.fsdp",
}


#: The power-limit optimizer's options: given with --no-power-limit-optimizer they would do
#: nothing, so they are an error there (and in launch()).
OPTIMIZER_OPTIONS = {
    "adaptive": "--exhaustive",
    "max_slowdown": "--max-slowdown",
    "wait_steps": "--wait-steps",
    "warmup_steps": "--warmup-steps",
    "profile_steps": "--profile-steps",
    "pl_step": "--pl-step",
    "profile_path": "--profile-path",
}


def _add_optimizer_flags(p: argparse.ArgumentParser, d: TrainConfig) -> None:
    p.add_argument(
        "--no-power-limit-optimizer",
        dest="power_limit_optimizer",
        action="store_false",
        help="train at the current power limit",
    )
    p.add_argument(
        "--exhaustive",
        dest="adaptive",
        action="store_const",
        const=False,
        help="profile every power limit (default: skip limits that cannot win)",
    )
    p.add_argument(
        "--max-slowdown",
        type=real(low=1.0, high=100.0),
        help="default: ZEUS_MAX_SLOWDOWN (or ZEUS_NB_MAX_SLOWDOWN), else 1.1",
    )
    p.add_argument("--wait-steps", type=count(0), help=f"default {d.wait_steps}")
    p.add_argument("--warmup-steps", type=count(0), help=f"default {d.warmup_steps}")
    p.add_argument("--profile-steps", type=count(1), help=f"default {d.profile_steps}")
    p.add_argument(
        "--pl-step", type=count(1, 2000), help=f"W between profiled limits (default {d.pl_step})"
    )
    p.add_argument(
        "--profile-path", type=nonempty("path"), help="reuse (or save) the power-limit profile"
    )
    on = lambda ns: ns.power_limit_optimizer  # noqa: E731
    for field_name, option in OPTIMIZER_OPTIONS.items():
        only_with(p, option, on, "with the power-limit optimizer (not with "
                  "--no-power-limit-optimizer)", getattr(d, field_name))  # fmt: skip


def parser(mode: str) -> argparse.ArgumentParser:
    """The command line of ``zeus_nb.train.<mode>``; every flag is a :class:`TrainConfig` field."""
    p = Parser(
        prog=LAUNCH_COMMANDS[mode],
        description=(
            "Train an image classifier while the power-limit optimizer picks the lowest GPU power "
            "limit within the allowed slowdown (ZEUS_MAX_SLOWDOWN, default 1.1)."
        ),
    )
    d = TrainConfig()
    p.add_argument(
        "data_dir",
        nargs="?",
        type=nonempty("path"),
        metavar="DATA_DIR",
        help="the same as --data (Zeus's example scripts take the data directory first)",
    )
    p.add_argument(
        "--data",
        type=nonempty("path"),
        default=env("ZEUS_NB_DATA_DIR", d.data),
        help="ImageNet-layout folder, or 'synthetic' (default: $ZEUS_NB_DATA_DIR, else synthetic)",
    )
    p.add_argument(
        "--arch",
        type=nonempty("name"),
        default=d.arch,
        help="'tiny' or a torchvision model (resnet50)",
    )
    p.add_argument("--epochs", type=count(1), default=d.epochs)
    p.add_argument("--batch-size", type=count(1), default=d.batch_size, help="per process")
    p.add_argument("--lr", type=real(low=0.0), default=d.lr)
    p.add_argument("--momentum", type=real(low=0.0, high=1.0), default=d.momentum)
    p.add_argument("--weight-decay", type=real(low=0.0), default=d.weight_decay)
    p.add_argument(
        "--lr-step-epochs", type=count(1), default=d.lr_step_epochs, help="StepLR period (x0.1)"
    )
    p.add_argument(
        "--image-size", type=count(8, 4096), help="default 224 (folders) or 32 (synthetic)"
    )
    p.add_argument(
        "--workers", type=count(0, 256), help="DataLoader workers (default 0 or up to 8)"
    )
    p.add_argument("--max-steps-per-epoch", type=count(1), help="cap steps per epoch (quick runs)")
    p.add_argument("--num-classes", type=count(2), default=d.num_classes, help="synthetic data")
    p.add_argument("--train-size", type=count(1), default=d.train_size, help="synthetic data")
    p.add_argument("--val-size", type=count(1), default=d.val_size, help="synthetic data")
    p.add_argument(
        "--backend", choices=("auto", "sim", "nvml"), help="zeus-nb GPU backend (default: auto)"
    )
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default=d.device)
    if mode == "single":
        p.add_argument("--gpu", type=count(0, 1023), default=d.gpu, help="GPU index to train on")
    _add_optimizer_flags(p, d)
    p.add_argument(
        "--results", type=nonempty("path"), help=f"results JSON (default runs/train_{mode}.json)"
    )
    p.add_argument("--seed", type=count(0, 2**32 - 1), default=d.seed)
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument(
        "--threads",
        type=count(1, 1024),
        help="torch CPU threads per process (default: OMP_NUM_THREADS if set, else one per "
        "10 M parameters, at most this process's share of the cores)",
    )
    return p


def config_from_args(mode: str, argv: list[str] | None = None) -> TrainConfig:
    """Parse ``argv`` (default: ``sys.argv[1:]``) into a :class:`TrainConfig`."""
    p = parser(mode)
    args = vars(p.parse_args(argv))
    data_dir = args.pop("data_dir", None)
    if data_dir is not None:
        words = argv if argv is not None else sys.argv[1:]
        given = any(w == "--data" or w.startswith("--data=") for w in words)
        if given and args["data"] != data_dir:
            p.error(f"DATA_DIR {data_dir!r} and --data {args['data']!r} disagree; give one")
        args["data"] = data_dir
    known = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in args.items() if k in known})
