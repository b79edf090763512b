"""Named models for pipeline training, as flat lists of layers a pipeline can cut anywhere.

Every model is a sequence of layers that each take one tensor and return one tensor, so a stage is
a contiguous slice and stage boundaries carry a single activation. The names follow the Merak
model table (``bert-*``, ``gpt3-*``, ``wide-resnet*``); sizes come from the published
architectures (GPT-3 paper Table 2.1 for depth and width, GPT-2's 1024 positions and 50257-token
vocabulary, BERT's 30522-token vocabulary and 512 positions, torchvision's wide ResNets), with
random initialization and no downloads. ``tiny-*`` models are scaled-down versions that train in
seconds on a CPU.

Parameter counts (:func:`table_parameters`) count a tied input/output embedding once, as the
model table does; the pipeline itself unties them (the head lives on the last stage, the
embedding on the first), which adds ``vocab x hidden`` parameters to a built language model.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from zeus_nb.errors import InputError, ZeusNbError


class UnknownModelError(ZeusNbError, ValueError):
    """A pipeline model name that is not in the table."""


@dataclass(frozen=True)
class TransformerConfig:
    """A GPT-style (causal) or BERT-style (bidirectional, masked-LM head) transformer."""

    family: str  # "gpt" or "bert"
    layers: int
    hidden: int
    heads: int
    vocab: int
    positions: int
    seq_len: int
    global_batch_size: int = 512

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise InputError(f"hidden size {self.hidden} is not divisible by {self.heads} heads")
        if self.seq_len > self.positions:
            raise InputError(f"seq_len {self.seq_len} exceeds {self.positions} positions")


@dataclass(frozen=True)
class WideResNetConfig:
    """A bottleneck ResNet whose convolutions are ``width`` times wider (Zagoruyko & Komodakis)."""

    blocks: tuple[int, ...]  # bottleneck blocks per stage: (3, 4, 6, 3) is ResNet-50
    width: int  # width factor: 2 is torchvision's wide_resnet50_2
    base_planes: int = 64
    image_size: int = 224
    num_classes: int = 1000
    global_batch_size: int = 1536


ModelConfig = TransformerConfig | WideResNetConfig

_GPT = dict(family="gpt", vocab=50257, positions=1024, seq_len=1024)
_BERT = dict(family="bert", vocab=30522, positions=512, seq_len=512, global_batch_size=256)

MODELS: dict[str, ModelConfig] = {
    "bert-base-uncased": TransformerConfig(layers=12, hidden=768, heads=12, **_BERT),
    "bert-large-uncased": TransformerConfig(layers=24, hidden=1024, heads=16, **_BERT),
    "gpt3-small": TransformerConfig(layers=12, hidden=768, heads=12, **_GPT),
    "gpt3-medium": TransformerConfig(layers=24, hidden=1024, heads=16, **_GPT),
    "gpt3-large": TransformerConfig(layers=24, hidden=1536, heads=16, **_GPT),
    "gpt3-xl": TransformerConfig(layers=24, hidden=2048, heads=16, global_batch_size=1024, **_GPT),
    "gpt3-2.7b": TransformerConfig(
        layers=32, hidden=2560, heads=32, global_batch_size=1024, **_GPT
    ),
    "gpt3-6.7b": TransformerConfig(
        layers=32, hidden=4096, heads=32, global_batch_size=2048, **_GPT
    ),
    "gpt3-13b": TransformerConfig(layers=40, hidden=5120, heads=40, global_batch_size=2048, **_GPT),
    "gpt3-175b": TransformerConfig(
        layers=96, hidden=12288, heads=96, global_batch_size=3200, **_GPT
    ),
    # CPU-sized stand-ins with the same layer structure
    "tiny-gpt": TransformerConfig(
        family="gpt", layers=8, hidden=64, heads=4, vocab=512, positions=64, seq_len=32
    ),
    "tiny-bert": TransformerConfig(
        family="bert", layers=8, hidden=64, heads=4, vocab=512, positions=64, seq_len=32
    ),
    "tiny-wide-resnet": WideResNetConfig(
        blocks=(1, 1, 2, 1), width=2, base_planes=8, image_size=32, num_classes=10
    ),
}

# Parameter counts of the model table (millions), what the table-driven tests compare against.
TABLE_PARAMETERS_M: dict[str, float] = {
    "bert-base-uncased": 109.43,
    "bert-large-uncased": 334.95,
    "gpt3-small": 124.44,
    "gpt3-medium": 354.82,
    "gpt3-large": 758.73,
    "gpt3-xl": 1313.63,
    "gpt3-2.7b": 2648.93,
    "gpt3-6.7b": 6654.21,
    "gpt3-13b": 12848.14,
    "gpt3-175b": 174591.68,
    "wide-resnet50_2": 68.88,
    "wide-resnet50_4": 223.44,
    "wide-resnet50_8": 804.16,
    "wide-resnet101_2": 126.89,
    "wide-resnet101_4": 419.63,
    "wide-resnet101_8": 1517.37,
}

_WRN = re.compile(r"^wide-resnet(50|101)_(\d+)$")
_WRN_BLOCKS = {"50": (3, 4, 6, 3), "101": (3, 4, 23, 3)}


def model_names() -> list[str]:
    """Every name :func:`get_config` accepts (wide ResNets: any ``wide-resnet{50,101}_K``)."""
    wrn = [n for n in TABLE_PARAMETERS_M if n.startswith("wide-resnet")]
    return sorted(set(MODELS) | set(wrn))


def get_config(name: str, **overrides: Any) -> ModelConfig:
    """The configuration called ``name``; keyword overrides replace fields (e.g. ``seq_len``)."""
    config: ModelConfig | None = MODELS.get(name)
    if config is None:
        m = _WRN.match(name)
        if m and int(m.group(2)) >= 1:
            config = WideResNetConfig(blocks=_WRN_BLOCKS[m.group(1)], width=int(m.group(2)))
    if config is None:
        raise UnknownModelError(
            f"unknown pipeline model {name!r}; use one of {', '.join(model_names())} "
            "(wide ResNets take any width: wide-resnet50_K or wide-resnet101_K)"
        )
    return replace(config, **overrides) if overrides else config


def table_parameters(config: ModelConfig) -> int:
    """Parameters of the model with tied embeddings, computed from the architecture alone."""
    if isinstance(config, WideResNetConfig):
        return sum(_count(layer) for layer in build_layers(config, device="meta"))
    d, layers = config.hidden, config.layers
    block = 12 * d * d + 13 * d  # qkv, projection, 4x MLP, two LayerNorms
    embed = (config.vocab + config.positions) * d
    if config.family == "gpt":
        return embed + layers * block + 2 * d  # final LayerNorm; the head is the tied embedding
    # BERT: token types and embedding LayerNorm; MLM head: dense + LayerNorm + output bias
    return embed + 2 * d + 2 * d + layers * block + d * d + d + 2 * d + config.vocab


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- building -----------------------------------------------------------------------------------
def build_layers(config: ModelConfig, device: Any = "cpu") -> list:
    """The model as a list of single-tensor-in, single-tensor-out modules (untrained)."""
    import torch

    with torch.device(device):
        if isinstance(config, WideResNetConfig):
            return _resnet_layers(config)
        return _transformer_layers(config)


def layer_parameters(config: ModelConfig) -> list[int]:
    """Parameter count of each layer, from a build on the meta device (no memory used)."""
    return [_count(layer) for layer in build_layers(config, device="meta")]


def sample_batch(config: ModelConfig, batch_size: int, generator=None, device: Any = "cpu"):
    """A synthetic (inputs, targets) batch for the model: random tokens or images."""
    import torch

    if isinstance(config, WideResNetConfig):
        size = (3, config.image_size, config.image_size)
        # each class has a fixed random template (seed 0); images are template plus noise
        templates = torch.randn(
            (config.num_classes, *size), generator=torch.Generator().manual_seed(0)
        )
        y = torch.randint(0, config.num_classes, (batch_size,), generator=generator)
        x = templates[y] + torch.randn((batch_size, *size), generator=generator)
        return x.to(device), y.to(device)
    # counting sequences from a random start: learnable (each token predicts the next), so the
    # loss falls within a few steps
    start = torch.randint(0, config.vocab, (batch_size, 1), generator=generator)
    seq = (start + torch.arange(config.seq_len + 1)) % config.vocab
    # language modelling: the next token (GPT) or the token itself (BERT's masked-LM objective).
    # Slices of ``seq`` keep its row stride (seq_len + 1); copied out, each batch is laid out as
    # any tensor of its shape is, which is what a pipeline schedule records for its stages'
    # inputs (torch 2.11 checks every microbatch's strides against that record).
    x = seq[:, :-1].contiguous()
    y = seq[:, 1:].contiguous() if config.family == "gpt" else x.clone()
    return x.to(device), y.to(device)


def loss_fn(config: ModelConfig):
    """Cross-entropy over the model's output (token logits or class logits)."""
    import torch.nn.functional as F

    def loss(output, target):
        return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))

    return loss


def _transformer_layers(config: TransformerConfig) -> list:
    from torch import nn

    causal = config.family == "gpt"
    layers: list[nn.Module] = [_Embedding(config)]
    layers += [_Block(config.hidden, config.heads, causal) for _ in range(config.layers)]
    layers.append(_LMHead(config))
    return layers


def _resnet_layers(config: WideResNetConfig) -> list:
    from torch import nn
    from torchvision.models.resnet import Bottleneck

    base = config.base_planes
    stem = nn.Sequential(
        nn.Conv2d(3, base, 7, 2, 3, bias=False),
        nn.BatchNorm2d(base),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    )
    layers: list[nn.Module] = [stem]
    inplanes = base
    for i, count in enumerate(config.blocks):
        planes = base * 2**i
        for j in range(count):
            stride = 2 if i > 0 and j == 0 else 1
            downsample = None
            if j == 0 and (stride != 1 or inplanes != planes * Bottleneck.expansion):
                downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes * Bottleneck.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * Bottleneck.expansion),
                )
            # base_width scales the 3x3 convolutions' channels: 64 * width is the wide ResNet
            layers.append(
                Bottleneck(inplanes, planes, stride, downsample, base_width=64 * config.width)
            )
            inplanes = planes * Bottleneck.expansion
    layers.append(
        nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, config.num_classes)
        )
    )
    return layers


@functools.cache
def _module_classes():
    """The transformer layer classes, defined on first use so importing needs no torch."""
    from torch import nn
    from torch.nn import functional as F

    class Embedding(nn.Module):
        def __init__(self, config: TransformerConfig):
            super().__init__()
            self.tokens = nn.Embedding(config.vocab, config.hidden)
            self.positions = nn.Embedding(config.positions, config.hidden)
            self.bert = config.family == "bert"
            if self.bert:  # token types (one segment is used) and BERT's embedding LayerNorm
                self.types = nn.Embedding(2, config.hidden)
                self.norm = nn.LayerNorm(config.hidden)

        def forward(self, ids):
            pos = self.positions.weight[: ids.shape[1]]
            h = self.tokens(ids) + pos
            if self.bert:
                h = self.norm(h + self.types.weight[0])
            return h

    class Block(nn.Module):
        def __init__(self, hidden: int, heads: int, causal: bool):
            super().__init__()
            self.heads, self.causal = heads, causal
            self.norm1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.norm2 = nn.LayerNorm(hidden)
            self.mlp = nn.Sequential(
                nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)
            )

        def forward(self, h):
            b, t, d = h.shape
            q, k, v = self.qkv(self.norm1(h)).split(d, dim=2)
            q, k, v = (x.view(b, t, self.heads, d // self.heads).transpose(1, 2) for x in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            h = h + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return h + self.mlp(self.norm2(h))

    class LMHead(nn.Module):
        def __init__(self, config: TransformerConfig):
            super().__init__()
            d = config.hidden
            self.transform = None
            if config.family == "bert":  # BERT's masked-LM transform before the decoder
                self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
            self.norm = nn.LayerNorm(d) if config.family == "gpt" else None
            self.out = nn.Linear(d, config.vocab, bias=config.family == "bert")

        def forward(self, h):
            h = self.norm(h) if self.norm is not None else self.transform(h)
            return self.out(h)

    return Embedding, Block, LMHead


def _Embedding(config: TransformerConfig):
    return _module_classes()[0](config)


def _Block(hidden: int, heads: int, causal: bool):
    return _module_classes()[1](hidden, heads, causal)


def _LMHead(config: TransformerConfig):
    return _module_classes()[2](config)


def reset_parameters(module, seed: int) -> None:
    """Initialize a module built on the meta device and moved with ``to_empty``, reproducibly."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in module.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
            for name, buf in m.named_buffers(recurse=False):
                if "running_var" in name:
                    buf.fill_(1.0)
                elif "running_mean" in name or "num_batches_tracked" in name:
                    buf.zero_()
