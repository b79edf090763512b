"""``torch_train_fn`` and ``synthetic_images`` now live in :mod:`zeus_nb.train.sweep_fn`."""

from zeus_nb.train.sweep_fn import synthetic_images, torch_train_fn

__all__ = ["synthetic_images", "torch_train_fn"]
