"""What differs between a student's answer and the right one, in words that give no number away.

When no known mistake explains a wrong answer, :mod:`zeus_nb.course.check` cannot name the
mistake; guessing one (the nearest known mistake) would send the student after a bug they do not
have. It says instead *how* the answer differs: a little too high, the wrong sign, a tuple where a
number is expected, the right points in another order, the right first value and a wrong second
one. Never the expected value itself: a factor is given as a range ("within 10 %", "more than
2x"), never as a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _is_number(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return not isinstance(x, (str, bytes))


def _integral(x: Any) -> bool:
    return _is_number(x) and not isinstance(x, float) and float(x) == int(float(x))


def _kind(x: Any) -> str:
    if x is None:
        return "None"
    if isinstance(x, bool):
        return "a yes/no answer (bool)"
    if _is_number(x):
        return "a number"
    if isinstance(x, tuple):
        return f"a tuple of {len(x)}"
    if isinstance(x, list):
        return "a list"
    return f"a {type(x).__name__}"


def _same(a: Any, b: Any, rel: float = 1e-6) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if _is_number(a) and _is_number(b):
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)
    return a == b


def _number(answer: Any, expected: Any) -> str:
    a, e = float(answer), float(expected)
    if math.isnan(a):
        return "is NaN (not a number)"
    if _integral(expected):  # a batch size, an index: nearer or farther says nothing
        if a != round(a):
            return "is not a whole number, and the right answer is one"
        return "is not the right one"
    if e == 0:
        return "is not 0"
    if a == 0:
        return "is 0, and the answer is not"
    if (a > 0) != (e > 0):
        return "has the wrong sign"
    ratio = a / e
    if ratio > 1:
        if ratio < 1.1:
            return "is a little too high (less than 10 % off)"
        return "is too high (by 10 % to 2x)" if ratio <= 2 else "is far too high (more than 2x)"
    if ratio > 0.9:
        return "is a little too low (less than 10 % off)"
    return "is too low (by 10 % to half)" if ratio >= 0.5 else "is far too low (under half)"


def _items(answer: Sequence[Any], expected: Sequence[Any]) -> str:
    """A list of items (points, plans): which are extra, which are missing, or the order."""

    def key(x: Any) -> Any:
        return tuple(round(float(v), 9) for v in x) if isinstance(x, (tuple, list)) else x

    try:
        got, want = sorted(map(key, answer)), sorted(map(key, expected))
    except (TypeError, ValueError):
        return "holds other items than the right ones"
    if got == want:
        return "holds the right items in another order"
    extra = any(x not in want for x in got)
    missing = any(x not in got for x in want)
    if extra and missing:
        return "holds items that do not belong and misses some that do"
    if extra:
        return "holds every right item and some that do not belong"
    return "holds only right items but misses some"


def _values(answer: Sequence[Any], expected: Sequence[Any], subject: str) -> str:
    """A tuple of values, as a whole clause: which positions differ and how ("the first value
    of your answer is right, and its second value is too high ...")."""
    parts = []
    for i, (a, e) in enumerate(zip(answer, expected, strict=True)):
        which = ORDINALS[i] if i < len(ORDINALS) else f"value {i + 1}"
        first = not parts and subject != "it"
        owner = f"the {which} value of {subject}" if first else f"its {which} value"
        parts.append(f"{owner} {'is right' if _same(a, e) else describe(a, e)}")
    return ", and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)


def describe(answer: Any, expected: Any) -> str:
    """How ``answer`` differs from ``expected``, as the end of a sentence ("is too high ..."):
    a tuple of values is said as :func:`clause` says it, about "it"."""
    if isinstance(expected, bool) or isinstance(answer, bool):
        if isinstance(expected, bool) and isinstance(answer, bool):
            return f"is {answer} where the right answer is {expected}"
        return f"is {_kind(answer)} where {_kind(expected)} is expected"
    if _is_number(expected) and _is_number(answer):
        return _number(answer, expected)
    if isinstance(expected, (tuple, list)) and isinstance(answer, (tuple, list)):
        nested = any(isinstance(x, (tuple, list)) for x in [*expected, *answer])
        if nested:
            return _items(answer, expected)
        if len(answer) != len(expected):
            return f"has {len(answer)} values where {len(expected)} are expected"
        return "differs: " + _values(answer, expected, "it")
    return f"is {_kind(answer)} where {_kind(expected)} is expected"


def clause(subject: str, answer: Any, expected: Any) -> str:
    """A whole clause about ``subject`` ("your answer"): "your answer is too high ...", or for a
    tuple "the first value of your answer is right, and its second value is too high ..."."""
    if (
        isinstance(expected, (tuple, list))
        and isinstance(answer, (tuple, list))
        and len(answer) == len(expected)
        and not any(isinstance(x, (tuple, list)) for x in [*expected, *answer])
        and not isinstance(expected, bool)
    ):
        return _values(answer, expected, subject)
    return f"{subject} {describe(answer, expected)}"


def describe_case(answers: Sequence[Any], expected: Sequence[Any]) -> str:
    """How a case's answers differ: the first call that differs (several calls: say which)."""
    for i, (a, e) in enumerate(zip(answers, expected, strict=True)):
        if not _same(a, e):
            if len(answers) > 1:
                which = ORDINALS[i] if i < len(ORDINALS) else f"call {i + 1}"
                return clause(f"your answer to its {which} call", a, e)
            return clause("your answer", a, e)
    return "your answer differs"
