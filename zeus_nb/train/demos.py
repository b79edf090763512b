"""Small models the notebooks and tests train: quick on a CPU, so the GPU side is what matters.

torch and transformers are imported inside the functions, so ``import zeus_nb.train.demos`` works
on a base install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def small_classifier(size: int = 8, num_classes: int = 10, hidden: int = 32) -> Any:
    """A two-layer perceptron over ``3 x size x size`` images (a ``torch.nn.Module``)."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(3 * size * size, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, num_classes),
    )


def random_tokens(n: int = 64, length: int = 8, vocab: int = 32, seed: int = 0) -> list[dict]:
    """``n`` random token sequences with binary labels, as Trainer examples."""
    import torch

    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (n, length), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    return [{"input_ids": t, "labels": y} for t, y in zip(tokens, labels, strict=True)]


def tiny_bert_trainer(
    output_dir: str | Path,
    callbacks: list | None = None,
    max_steps: int = 40,
    batch_size: int = 8,
    seed: int = 0,
    dataset: Any = None,
) -> Any:
    """A Hugging Face ``Trainer`` of a one-layer BERT on :func:`random_tokens`, on the CPU.

    Nothing is saved or logged; the callbacks (an ``HFGlobalPowerLimitOptimizer``) see every step.
    Needs ``pip install 'zeus-nb[hf]'``.
    """
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    args = transformers.TrainingArguments(
        output_dir=str(output_dir),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        seed=seed,
    )
    trainer = transformers.Trainer(
        model=transformers.BertForSequenceClassification(config),
        args=args,
        train_dataset=random_tokens(seed=seed) if dataset is None else dataset,
        callbacks=list(callbacks or []),
    )
    # without tqdm the Trainer prints its final metrics as a raw dict; nothing is to be logged
    trainer.remove_callback(transformers.PrinterCallback)
    return trainer
