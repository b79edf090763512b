"""zeus_nb.callback: Zeus's hook names and arguments, and a set that calls members in order."""

from __future__ import annotations

import inspect

import pytest

from zeus_nb.callback import HOOKS, Callback, CallbackSet
from zeus_nb.errors import InputError

# Zeus 0.16's zeus.callback.Callback: hook -> its parameters after self (none have defaults).
ZEUS_HOOKS = {
    "on_train_begin": [],
    "on_train_end": [],
    "on_epoch_begin": [],
    "on_epoch_end": [],
    "on_step_begin": [],
    "on_step_end": [],
    "on_evaluate": ["metric"],
    "on_instruction_begin": ["name"],
    "on_instruction_end": ["name"],
}


def call_all(cb: Callback) -> None:
    """Every hook once, with arguments where Zeus's hook takes one."""
    for hook, params in ZEUS_HOOKS.items():
        getattr(cb, hook)(*(f"{hook}-arg" for _ in params))


class Recorder(Callback):
    """Logs ``(tag, hook, args)`` for every hook into a shared list."""

    def __init__(self, tag: str, log: list):
        self.tag, self.log = tag, log

    def __getattribute__(self, name):
        if name in ZEUS_HOOKS:
            return lambda *args: self.log.append((self.tag, name, args))
        return super().__getattribute__(name)


@pytest.mark.parametrize("cls", [Callback, CallbackSet])
def test_hooks_have_zeus_names_and_parameters(cls):
    assert set(HOOKS) == set(ZEUS_HOOKS)
    for hook, params in ZEUS_HOOKS.items():
        sig = inspect.signature(getattr(cls, hook))
        assert list(sig.parameters)[1:] == params, hook
        assert all(p.default is inspect.Parameter.empty for p in sig.parameters.values())


def test_base_hooks_do_nothing_and_a_subclass_overrides_only_some():
    seen = []

    class OnlyEvaluate(Callback):
        def on_evaluate(self, metric: float) -> None:
            seen.append(metric)

    cb = OnlyEvaluate()
    call_all(Callback())
    call_all(cb)
    assert seen == ["on_evaluate-arg"]
    assert all(getattr(Callback(), h)(*["x"] * len(p)) is None for h, p in ZEUS_HOOKS.items())


def test_callback_set_calls_every_member_in_order_with_the_arguments():
    log: list = []
    members = [Recorder("a", log), Recorder("b", log), Recorder("c", log)]
    hooks = CallbackSet(members)
    assert isinstance(hooks, Callback)
    assert hooks.callbacks == members
    call_all(hooks)
    expected = [
        (tag, hook, tuple(f"{hook}-arg" for _ in params))
        for hook, params in ZEUS_HOOKS.items()
        for tag in "abc"
    ]
    assert log == expected


def test_sets_nest_and_an_empty_set_is_fine():
    log: list = []
    inner = CallbackSet([Recorder("x", log), Recorder("y", log)])
    outer = CallbackSet([Recorder("w", log), inner, Recorder("z", log)])
    outer.on_evaluate(0.9)
    assert log == [(t, "on_evaluate", (0.9,)) for t in "wxyz"]
    call_all(CallbackSet([]))


def test_a_member_that_raises_stops_the_hook_there():
    log: list = []

    class Boom(Callback):
        def on_step_end(self) -> None:
            raise RuntimeError("boom")

    hooks = CallbackSet([Recorder("a", log), Boom(), Recorder("b", log)])
    with pytest.raises(RuntimeError, match="boom"):
        hooks.on_step_end()
    assert log == [("a", "on_step_end", ())]


def test_members_are_checked_when_the_set_is_built():
    class Partial:
        def on_step_begin(self) -> None: ...

    with pytest.raises(InputError, match=r"callbacks\[1\] \(Partial\) has no on_train_begin\(\)"):
        CallbackSet([Callback(), Partial()])
    with pytest.raises(InputError, match=r"wrap a single callback in a list"):
        CallbackSet(Callback())  # type: ignore[arg-type]
    with pytest.raises(InputError, match="takes a list of callbacks, got int"):
        CallbackSet(3)  # type: ignore[arg-type]

    class DuckTyped:  # every hook, no base class: accepted, as Zeus would call it
        pass

    for hook in ZEUS_HOOKS:
        setattr(DuckTyped, hook, lambda self, *a: None)
    CallbackSet([DuckTyped()]).on_instruction_end("forward")
