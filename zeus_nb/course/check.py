"""Checks for the notebook exercises: feedback for people, never the checker's answers.

``f = check.<exercise>(f)`` runs a student's function on a few kinds of cases (fixed ones and
random ones drawn from the notebook's seed, so one memorized number cannot pass) and shows one
short line (HTML in Jupyter): how many cases were right, which kind of case went wrong, in words,
and a hint at the concept (units, which energy, which sign). It never shows the expected value of
a case, and never a traceback.

It returns the function the notebook should go on with: the student's when every case is right,
else the reference one, so later cells and plots still work while an exercise is unsolved
(``NotImplementedError`` from the student edition's stub reads as "not done yet").

A *strict* check raises :class:`CheckError` on a wrong answer instead of going on: that is how a
wrong reference solution fails the instructor edition and CI loudly. ``ZEUS_NB_CHECKS=strict`` or
``lenient`` decides; unset, checks are strict when no person drives the kernel (papermill, a plain
Python process) and lenient in JupyterLab. "Not done yet" is never an error: the student edition
runs to the end in CI.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The exercises live in zeus_nb.course.exercises; their registry, Case and use_seed are
# used as check.*.
from zeus_nb.course.exercises import EXERCISES, Case, use_seed  # noqa: F401 (re-exported)
from zeus_nb.inputs.env import env

PASSED_MARK = "\N{CHECK MARK}"
FAILED_MARK = "\N{BALLOT X}"
NOT_DONE_MARK = "\N{HOURGLASS}"
NOT_DONE = "not done yet"


class CheckError(AssertionError):
    """A function differs from the reference (raised by strict checks only)."""


@dataclass(frozen=True)
class Outcome:
    """What a check found: shown to the student, read by ``zeus-nb course grade``."""

    name: str
    status: str  # "passed", "failed", "not done"
    right: int
    total: int
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def strict() -> bool:
    """Whether a wrong answer raises (see the module doc)."""
    mode = env("ZEUS_NB_CHECKS")  # strict, lenient, or unset; anything else is an error
    if mode is not None:
        return mode == "strict"
    from zeus_nb.widgets import _interactive_kernel

    return not _interactive_kernel()


def _close(a: Any, b: Any, rel: float = 1e-6) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    try:
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def _judge(name: str, fn: Any, reference: Callable, cases: Sequence[Case]) -> Outcome:
    total = len(cases)
    if not callable(fn):
        msg = f"{name}: expected a function, got {type(fn).__name__}; define it with def"
        return Outcome(name, "failed", 0, total, msg)
    right, wrong = 0, []  # wrong: (kind, hint, what happened)
    for case in cases:
        try:
            got = fn(*case.args)
        except NotImplementedError:
            return Outcome(name, "not done", 0, total, f"{name}: {NOT_DONE}")
        except Exception as e:  # the student's code crashed: name the error, not our numbers
            wrong.append((case, f"raised {type(e).__name__}"))
            continue
        if _close(got, reference(*case.args)):
            right += 1
        else:
            wrong.append((case, "gave a different answer"))
    if not wrong:
        return Outcome(name, "passed", right, total, f"{name}: all {total} cases right")
    first, what = wrong[0]
    kinds = sorted({c.kind for c, _ in wrong}, key=[c.kind for c in cases].index)
    msg = (
        f"{name}: {right} of {total} cases right; wrong on {', '.join(kinds)} "
        f"(on {first.kind} it {what}). Hint: {first.hint}"
    )
    return Outcome(name, "failed", right, total, msg)


def _show(outcome: Outcome, going_on: bool) -> None:
    mark = {"passed": PASSED_MARK, "failed": FAILED_MARK}.get(outcome.status, NOT_DONE_MARK)
    tail = " The notebook goes on with the reference answer." if going_on else ""
    text = f"{mark} {outcome.message}.{tail}"
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and getattr(get_ipython(), "kernel", None) is not None:
        from IPython.display import display

        colour = {"passed": "#1b5e20", "failed": "#b71c1c"}.get(outcome.status, "#6d4c00")
        background = {"passed": "#e8f5e9", "failed": "#ffebee"}.get(outcome.status, "#fff8e1")
        body = html.escape(text)
        if outcome.status == "not done":
            body = html.escape(f"{mark} {outcome.name}: your turn, {NOT_DONE}.{tail}")
        style = (
            f"padding:4px 8px;border-left:4px solid {colour};background:{background};"
            f"color:{colour};font-family:sans-serif"
        )
        display({"text/plain": text, "text/html": f'<div style="{style}">{body}</div>'}, raw=True)
    else:
        print(text)


def _run(name: str, fn: Any, reference: Callable, cases: Sequence[Case]) -> Callable:
    outcome = _judge(name, fn, reference, cases)
    if outcome.passed:
        _show(outcome, going_on=False)
        return fn
    if outcome.status == "failed" and strict():
        _show(outcome, going_on=False)
        raise CheckError(outcome.message)
    _show(outcome, going_on=True)
    return reference


def judge(name: str, fn: Any) -> Outcome:
    """The outcome of exercise ``name`` for ``fn``, shown nowhere (for tests and tools)."""
    reference, make_cases = EXERCISES[name]
    return _judge(name, fn, reference, make_cases())


def _check(name: str) -> Callable[[Any], Callable]:
    reference, make_cases = EXERCISES[name]

    def check(fn: Any) -> Callable:
        return _run(name, fn, reference, make_cases())

    check.__name__ = name
    check.__doc__ = f"Check ``{name}``; returns the function to go on with."
    return check


average_power = _check("average_power")  # fn(measurement) -> W over the window, 0 if empty
energy_per_step = _check("energy_per_step")  # fn(measurement, steps) -> J per step
zeus_cost = _check("zeus_cost")  # fn(energy J, time s, eta, max_power W) -> cost
energy_optimal_limit = _check("energy_optimal_limit")  # fn(profile DataFrame) -> W
pareto_front = _check("pareto_front")  # fn([(time, energy)]) -> non-dominated, by time
should_stop_early = _check("should_stop_early")  # fn(cost, best or None, beta) -> stop?
aggregate_data_parallel = _check("aggregate_data_parallel")  # fn(times, energies) -> (t, e)
# fn(per-stage busy energy J, busy time s, iteration time s, blocking power W) -> J
iteration_energy = _check("iteration_energy")
# fn([(batch size, power limit W, time s, energy J)], eta) -> (batch size, power limit)
least_cost_config = _check("least_cost_config")
# fn({batch size: (mean cost, std)}, [z per arm]) -> the batch size of the cheapest draw
thompson_pick = _check("thompson_pick")
# fn([PowerLimitMeasurement], max_slowdown) -> the lowest limit within the slowdown budget
slowdown_limit = _check("slowdown_limit")
# fn([(iteration time s, energy J)], deadline s) -> index of the least-energy plan in time
plan_within = _check("plan_within")
