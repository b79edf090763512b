"""Checks for the notebook exercises: feedback for people, never the checker's answers.

``f = check.<exercise>(f)`` runs a student's function on a few kinds of cases (fixed ones and
random ones drawn from the notebook's seed, so one memorized number cannot pass) and shows one
short line (HTML in Jupyter): how many cases were right, which kind of case went wrong, in words,
and a hint that names the mistake made where it can: a unit slip (an answer off by a power of 1000
or by 3600, with the unit expected), a known mistake of the exercise (which energy, which sign,
min for max, an order assumed), else how the answer differs, in whole sentences. An exception is
shown by its type and message (which names the culprit), never by a traceback. It never shows
the expected value of a case.

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

import copy
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The exercises live in zeus_nb.course.exercises; their registry, Case and use_seed are
# used as check.*.
from zeus_nb.course.differ import describe_case
from zeus_nb.course.exercises import (  # noqa: F401 (re-exported)
    EXERCISES,
    MISTAKES,
    REFERENCES,
    UNITS,
    Case,
    Mistake,
    use_seed,
)
from zeus_nb.inputs.env import env

PASSED_MARK = "\N{CHECK MARK}"
FAILED_MARK = "\N{BALLOT X}"
NOT_DONE_MARK = "\N{HOURGLASS}"
NOT_DONE = "not done yet"
NONE_HINT = "the function returned None: end it with a `return` of the answer"
CONSTANT_HINT = "it gives the same answer whatever the input: compute the answer from the arguments"
# What a student reads after a failed or unfinished check; grading reads it off for the teacher.
GOING_ON = " The notebook goes on with the reference answer."
# The longest exception message shown (a message is one line; a longer one is cut with "...").
MESSAGE_CHARS = 160
# What an exception of each type usually means, said with its message (which names the culprit).
RAISED_HINTS = {
    "AttributeError": "the message names an attribute the object does not have: check its "
    "spelling against the names the notebook's text uses (dir(obj) lists them all)",
    "NameError": "the message names a name that is not defined: check its spelling, or define "
    "it in this cell",
    "KeyError": "the message names a key the dictionary does not hold",
    "IndexError": "a position past the end of a list: check the length you loop over",
    "TypeError": "a value has another type than the code expects (None, a tuple, a string?): "
    "the message says which",
    "ZeroDivisionError": "some input is 0: find where your code divides by it",
}
# Powers of 1000 and of 3600 (s per h) an answer is off by when its unit slipped:
# answer / right answer -> (the unit the student's answer is in, given the right unit; the slip)
_SLIPS: tuple[tuple[float, dict[str, str], str], ...] = (
    (1e-3, {"W": "kW", "J": "kJ"}, "divide by 1000"),
    (1e3, {"W": "mW", "J": "mJ"}, "multiply by 1000"),
    (1e-6, {"W": "MW", "J": "MJ"}, "divide by 1e6"),
    (1e6, {"W": "\N{MICRO SIGN}W", "J": "\N{MICRO SIGN}J"}, "multiply by 1e6"),
    (1 / 3600, {"J": "Wh"}, "divide by 3600"),
    (3600, {}, "multiply by 3600"),
    (1 / 3.6e6, {"J": "kWh"}, "divide by 3.6e6"),
)


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


@dataclass
class _Wrong:
    """A case answered wrong: ``what`` happened, and the answers when the function returned."""

    case: Case
    what: str
    answers: list[Any] | None
    error: str = ""  # the exception's type when the function raised


def _message(e: BaseException) -> str:
    """An exception's message on one line, cut to :data:`MESSAGE_CHARS` (never a traceback)."""
    text = " ".join(str(e).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def _answers(fn: Callable, case: Case) -> tuple[list[Any] | None, str, str]:
    """The function's answers to every call of ``case`` (copies of the inputs), or what it raised
    (its type and message: the message names the culprit) and the exception's type.

    ``NotImplementedError`` (the student edition's stub) is not caught.
    """
    answers = []
    for args in case.calls:
        try:
            answers.append(fn(*copy.deepcopy(args)))
        except NotImplementedError:
            raise
        except Exception as e:  # the student's code crashed: name the error, not our numbers
            name, message = type(e).__name__, _message(e)
            return None, f"raised {name}: {message}" if message else f"raised {name}", name
    return answers, "", ""


def _same_everywhere(answers: list[Any], expected: list[Any]) -> bool:
    """One answer for every input while the right answers differ: a constant."""
    return (
        len(answers) > 1
        and all(_close(a, answers[0]) for a in answers)
        and not all(_close(e, expected[0]) for e in expected)
    )


def _agrees(mistake: Mistake, case: Case, answers: list[Any]) -> bool:
    try:
        theirs = [mistake.fn(*copy.deepcopy(args)) for args in case.calls]
    except Exception:
        return False
    return all(_close(a, b) for a, b in zip(answers, theirs, strict=True))


def _fitting_hint(
    wrong: list[_Wrong], answered: list[tuple[Case, list[Any]]], mistakes: Sequence[Mistake]
) -> str | None:
    """The hint of the known mistake that explains the student's answers, if one does.

    A mistake explains them when it gives the student's answer on *every* case the student
    answered wrong (a mistake that only shares one wrong answer by coincidence is some other
    bug); among those, the one that also agrees on the most right cases wins.
    """
    wrong_answered = [w for w in wrong if w.answers is not None]
    if not wrong_answered:
        return None
    best, best_score = None, -1
    for mistake in mistakes:
        if not all(_agrees(mistake, w.case, w.answers) for w in wrong_answered):
            continue
        score = sum(_agrees(mistake, c, a) for c, a in answered)
        if score > best_score:
            best, best_score = mistake, score
    return best.hint if best else None


def _ratio(answer: Any, expected: Any) -> float | None:
    if isinstance(answer, bool) or isinstance(expected, bool):
        return None
    try:
        a, e = float(answer), float(expected)
    except (TypeError, ValueError):
        return None
    return a / e if e != 0 and math.isfinite(a) and math.isfinite(e) else None


def _unit_hint(unit: str | None, wrong: list[_Wrong], expected: dict[int, list[Any]]) -> str | None:
    """A unit slip: every answer given wrong is the right one times the same power of 1000 (or
    of 3600, seconds per hour). Said with the unit expected and the step that slipped."""
    if unit is None:
        return None
    ratios = [
        _ratio(a, e)
        for w in wrong
        if w.answers is not None
        for a, e in zip(w.answers, expected[id(w.case)], strict=True)
        if not _close(a, e)
    ]
    if not ratios or None in ratios:
        return None
    for factor, units, slip in _SLIPS:
        if all(math.isclose(r, factor, rel_tol=1e-6) for r in ratios):  # type: ignore[arg-type]
            size = f"{1 / factor:,.0f}x too low" if factor < 1 else f"{factor:,.0f}x too high"
            theirs = units.get(unit)
            instead = f", not {theirs}" if theirs else ""
            return (
                f"your answer is {size}, a slip of units: the answer is in {unit}{instead}, so "
                f"do not {slip}"
            )
    return None


def _sentences(*parts: str) -> str:
    """Clauses as sentences: the first as the hint starts (lower case), the others capitalized."""
    parts = tuple(p for p in parts if p)
    return ". ".join([parts[0], *(p[0].upper() + p[1:] for p in parts[1:])])


def _difference_hint(wrong: list[_Wrong], expected: dict[int, list[Any]]) -> str:
    """What differs, case by case, when no known mistake explains it; then what the first
    wrong case checks (its rule, never another mistake's advice)."""
    said: dict[str, list[str]] = {}
    for w in wrong:
        if w.answers is None:
            continue
        text = describe_case(w.answers, expected[id(w.case)])
        said.setdefault(text, []).append(w.case.kind)
    if len(said) == 1:  # one way of differing on every case answered: no need to list them
        parts = list(said)
    else:
        parts = [f"on '{', '.join(kinds)}', {text}" for text, kinds in list(said.items())[:2]]
    raised = next((w for w in wrong if w.error), None)
    advice = RAISED_HINTS.get(raised.error, "") if raised and not parts else ""
    first = raised.case if advice else wrong[0].case
    rule = f"the case '{first.kind}' checks that {first.hint}"
    return _sentences(advice, *parts, rule)


def _judge(
    name: str,
    fn: Any,
    reference: Callable,
    cases: Sequence[Case],
    mistakes: Sequence[Mistake] = (),
) -> Outcome:
    total = len(cases)
    if not callable(fn):
        msg = f"{name}: expected a function, got {type(fn).__name__}; define it with def"
        return Outcome(name, "failed", 0, total, msg)
    right, wrong = 0, []
    all_answers, all_expected, answered = [], [], []
    expected_of: dict[int, list[Any]] = {}
    for case in cases:
        expected = [reference(*copy.deepcopy(args)) for args in case.calls]
        expected_of[id(case)] = expected
        try:
            answers, raised, error = _answers(fn, case)
        except NotImplementedError:
            return Outcome(name, "not done", 0, total, f"{name}: {NOT_DONE}")
        if answers is None:
            wrong.append(_Wrong(case, raised, None, error))
            continue
        all_answers += answers
        all_expected += expected
        answered.append((case, answers))
        if all(_close(a, e) for a, e in zip(answers, expected, strict=True)):
            right += 1
        elif any(a is None for a in answers):
            wrong.append(_Wrong(case, "returned None", answers))
        else:
            wrong.append(_Wrong(case, "gave a different answer", answers))
    if not wrong:
        return Outcome(name, "passed", right, total, f"{name}: all {total} cases right")
    # what the message shows: a None first, then an exception (its message names the culprit)
    first = next(
        (w for w in wrong if w.what == "returned None"),
        next((w for w in wrong if w.error), wrong[0]),
    )
    if first.what == "returned None":
        hint = NONE_HINT
    elif _same_everywhere(all_answers, all_expected):
        hint = CONSTANT_HINT
    else:
        hint = (
            _unit_hint(UNITS.get(name), wrong, expected_of)
            or _fitting_hint(wrong, answered, mistakes)
            or _difference_hint(wrong, expected_of)
        )
    kinds = sorted({w.case.kind for w in wrong}, key=[c.kind for c in cases].index)
    msg = (
        f"{name}: {right} of {total} cases right; wrong on {', '.join(kinds)} "
        f"(on {first.case.kind} it {first.what}). Hint: {hint}"
    )
    return Outcome(name, "failed", right, total, msg)


def _show(outcome: Outcome, going_on: bool) -> None:
    mark = {"passed": PASSED_MARK, "failed": FAILED_MARK}.get(outcome.status, NOT_DONE_MARK)
    tail = GOING_ON if going_on else ""
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


def _run(
    name: str, fn: Any, reference: Callable, cases: Sequence[Case], mistakes: Sequence[Mistake]
) -> Callable:
    outcome = _judge(name, fn, reference, cases, mistakes)
    if outcome.passed:
        _show(outcome, going_on=False)
        return fn
    if outcome.status == "failed" and strict():
        _show(outcome, going_on=False)
        raise CheckError(outcome.message)
    _show(outcome, going_on=True)
    return reference


def is_reference(fn: Any) -> bool:
    """Whether ``fn`` is an exercise's reference answer: what a check returns until it passes."""
    try:
        return fn in REFERENCES
    except TypeError:  # unhashable: not one of ours
        return False


def whose(fn: Any, name: str) -> str:
    """ "your NAME" for the student's own function, "the reference NAME" for the reference one.

    Notebooks word every sentence about an exercise's result with it, so a line that says "your"
    always comes from the student's code.
    """
    return f"the reference {name}" if is_reference(fn) else f"your {name}"


def judge(name: str, fn: Any) -> Outcome:
    """The outcome of exercise ``name`` for ``fn``, shown nowhere (for tests and tools)."""
    reference, make_cases = EXERCISES[name]
    return _judge(name, fn, reference, make_cases(), MISTAKES[name]())


def _check(name: str) -> Callable[[Any], Callable]:
    reference, make_cases = EXERCISES[name]

    def check(fn: Any) -> Callable:
        return _run(name, fn, reference, make_cases(), MISTAKES[name]())

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
