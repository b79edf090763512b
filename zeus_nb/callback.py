"""Training-loop hooks with Zeus's names, and a set that forwards each hook to several objects.

A training loop calls the hooks of one :class:`Callback`; wrapping several objects (a power-limit
optimizer, a metric exporter, your own logger) in a :class:`CallbackSet` lets the loop stay
unaware of how many listen. Every hook of the base class does nothing, so a subclass overrides
only the moments it cares about. The hooks, their arguments and their order match
``zeus.callback`` (Zeus 0.16).
"""

from __future__ import annotations

from collections.abc import Iterable

from zeus_nb.errors import InputError

#: Every hook, in the order a training loop usually reaches them.
HOOKS = (
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_step_begin",
    "on_step_end",
    "on_evaluate",
    "on_instruction_begin",
    "on_instruction_end",
)


class Callback:
    """Base class of objects a training loop notifies; each hook is a no-op until overridden."""

    def on_train_begin(self) -> None:
        """Training is about to start (before the first epoch)."""

    def on_train_end(self) -> None:
        """Training has finished (after the last epoch)."""

    def on_epoch_begin(self) -> None:
        """An epoch is about to start."""

    def on_epoch_end(self) -> None:
        """An epoch has finished."""

    def on_step_begin(self) -> None:
        """A training step (one batch) is about to start."""

    def on_step_end(self) -> None:
        """A training step has finished."""

    def on_evaluate(self, metric: float) -> None:
        """The model was evaluated and scored ``metric`` (e.g. validation accuracy)."""

    def on_instruction_begin(self, name: str) -> None:
        """A pipeline instruction such as ``"forward"`` or ``"backward"`` is about to run."""

    def on_instruction_end(self, name: str) -> None:
        """A pipeline instruction such as ``"forward"`` or ``"backward"`` has finished."""


class CallbackSet(Callback):
    """Several callbacks behind one: each hook is called on every member, in list order.

    Members are checked when the set is built, so a member without some hook fails here with
    its position named, not in the middle of training. A member whose hook raises stops the
    hook there (later members are not called), as in Zeus.
    """

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        if isinstance(callbacks, Callback) or not isinstance(callbacks, Iterable):
            raise InputError(
                f"CallbackSet takes a list of callbacks, got {type(callbacks).__name__}; "
                "wrap a single callback in a list: CallbackSet([callback])"
            )
        self.callbacks = list(callbacks)
        for i, cb in enumerate(self.callbacks):
            missing = [h for h in HOOKS if not callable(getattr(cb, h, None))]
            if missing:
                raise InputError(
                    f"callbacks[{i}] ({type(cb).__name__}) has no {missing[0]}(); subclass "
                    "zeus_nb.callback.Callback, whose hooks do nothing until overridden"
                )

    def on_train_begin(self) -> None:
        for cb in self.callbacks:
            cb.on_train_begin()

    def on_train_end(self) -> None:
        for cb in self.callbacks:
            cb.on_train_end()

    def on_epoch_begin(self) -> None:
        for cb in self.callbacks:
            cb.on_epoch_begin()

    def on_epoch_end(self) -> None:
        for cb in self.callbacks:
            cb.on_epoch_end()

    def on_step_begin(self) -> None:
        for cb in self.callbacks:
            cb.on_step_begin()

    def on_step_end(self) -> None:
        for cb in self.callbacks:
            cb.on_step_end()

    def on_evaluate(self, metric: float) -> None:
        for cb in self.callbacks:
            cb.on_evaluate(metric)

    def on_instruction_begin(self, name: str) -> None:
        for cb in self.callbacks:
            cb.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        for cb in self.callbacks:
            cb.on_instruction_end(name)
