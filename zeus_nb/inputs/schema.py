"""Declared schemas: what each column of a table, or each field of a record, may hold.

A :class:`Schema` lists its :class:`Column` s (type, physical range, empty allowed or not), the
columns that identify a row (unique within one run of the file), and :class:`Check` s over a
whole row (average power = energy / time within a GPU's range, which is what catches a column in
mJ or ms) or over the whole table (:class:`Spread`: one cell 1000x off its neighbours). The same
schema checks CSV rows (:mod:`zeus_nb.inputs.table`), JSON records and database rows
(:func:`check_record`), so every kind of input follows one set of rules, with errors that name
the source, line and column and say what to do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zeus_nb.errors import InputError, TraceFormatError
from zeus_nb.inputs.validate import AVERAGE_POWER, Quantity, integer, number

__all__ = ["Check", "Column", "Ratio", "Row", "RowCheck", "Schema", "Spread", "check_record"]

KINDS = ("number", "integer", "integers", "text", "bool", "choice", "time", "any")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class Column:
    """One column (or record field) and what its cells may hold.

    ``name`` is a regular expression when ``pattern`` is true (``gpu(\\d+)_energy`` matches
    every GPU's column). Numbers lie in ``quantity``'s range, integers in ``[low, high]``;
    ``choices`` are compared in lower case. An empty cell (or one of the ``missing`` texts, such
    as the train trace's ``nan`` for "never reached") is an error unless ``empty_ok`` (then it
    reads as None); a missing column is an error unless ``optional``.
    """

    name: str
    kind: str = "number"
    quantity: Quantity | None = None
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    empty_ok: bool = False
    pattern: bool = False
    missing: tuple[str, ...] = ()  # texts that mean "no value" here, like an empty cell

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown column kind {self.kind!r}")

    def matches(self, header: str) -> bool:
        return re.fullmatch(self.name, header) is not None if self.pattern else header == self.name

    def parse(self, raw: Any, where: str, text_ok: bool = True) -> Any:
        """The cell as a checked value; ``text_ok=False`` for JSON (``"200"`` is no number)."""
        if raw is None or (isinstance(raw, str) and (not raw.strip() or raw in self.missing)):
            if self.empty_ok:
                return None
            raise InputError(f"{where}: the value is empty; expected {self.describe()}")
        kind = self.kind
        if kind == "number":
            return number(raw, where, self.quantity, text_ok=text_ok)
        if kind == "integer":
            if self.quantity is not None:  # a whole number of a unit (MHz): its range, and
                number(raw, where, self.quantity, text_ok=text_ok)  # the likely unit if off
            return integer(raw, where, self.low, self.high, text_ok=text_ok)
        if kind == "bool":
            return _boolean(raw, where, text_ok)
        if kind == "integers":
            return _integers(raw, where, self, text_ok)
        if kind == "time":
            return _timestamp(raw, where)
        if kind == "any":
            return raw
        if not isinstance(raw, str):
            raise InputError(f"{where}: {raw!r} is not text; expected {self.describe()}")
        text = raw.strip()
        if kind == "choice" and text.lower() not in self.choices:
            raise InputError(f"{where}: {text!r} is not one of {', '.join(self.choices)}")
        return text.lower() if kind == "choice" else text

    def describe(self) -> str:
        if self.kind == "number" and self.quantity is not None:
            return "a finite " + self.quantity.describe()
        if self.kind == "integer":
            span = f" >= {self.low}" if self.low is not None else ""
            span += f" and <= {self.high}" if self.high is not None else ""
            return f"an integer{span}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        return {
            "number": "a finite number",
            "bool": "true or false",
            "integers": "a list of integers",
            "time": "Unix seconds or an ISO 8601 time",
        }.get(self.kind, "text")


def _integers(raw: Any, where: str, col: Column, text_ok: bool) -> tuple[int, ...]:
    """A non-empty list of integers (or comma-separated text where text is allowed)."""
    if isinstance(raw, str) and text_ok:
        raw = [v for v in raw.split(",") if v.strip()]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputError(f"{where}: {_short(raw)} is not a non-empty list of integers")
    return tuple(
        integer(v, f"{where}, item {i + 1}", col.low, col.high, text_ok=text_ok)
        for i, v in enumerate(raw)
    )


#: Unix seconds past this (year 5138) are a time in ms (or us) since 1970, not in s.
_LATEST_UNIX_SECONDS = 1e11


def _unix_seconds(x: float, where: str) -> float:
    if abs(x) > _LATEST_UNIX_SECONDS:
        unit = "ms" if abs(x) / 1e3 <= _LATEST_UNIX_SECONDS else "us"
        raise InputError(
            f"{where}: {x:g} is no time in Unix seconds (it is after the year 5000); it looks "
            f"like {unit} since 1970: give seconds (or an ISO 8601 time)"
        )
    return x


def _timestamp(raw: Any, where: str) -> float:
    """Unix seconds, or an ISO 8601 time (UTC unless it carries an offset)."""
    from datetime import datetime, timezone

    if isinstance(raw, str):
        text = raw.strip()
        try:
            return _unix_seconds(number(text, where), where)
        except InputError as e:
            if "Unix seconds" in str(e):
                raise
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{where}: {text!r} is not a time; give Unix seconds or ISO 8601 "
                "(2024-05-01T12:00:00Z)"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    return _unix_seconds(number(raw, where, text_ok=False), where)


def _boolean(raw: Any, where: str, text_ok: bool) -> bool:
    if isinstance(raw, bool) or getattr(getattr(raw, "dtype", None), "kind", "") == "b":
        return bool(raw)  # also numpy's bool
    if text_ok and isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise InputError(f"{where}: {raw!r} is not true or false")


class Row(dict):
    """A checked row: column name -> value, plus where it came from (``line``, ``run``)."""

    line: int = 0
    run: int = 1
    where: str = ""


class Check:
    """A rule over a whole row; :meth:`problem` returns what is wrong (with the column it is
    about, as ``(column, text)``), or None."""

    def problem(self, row: Row) -> str | tuple[str, str] | None:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class Ratio(Check):
    """``numerator / denominator`` (per ``per``, e.g. per GPU) within ``quantity``.

    Energy over time must be a power a GPU can draw: a column written in mJ or ms makes that
    power 1000x off, out of range, even when each value alone is possible. ``cap`` (a function
    of the row, e.g. the window's power limit) lowers the upper end to ``cap x cap_factor``.
    ``numerator`` may be a pattern matching several columns (every GPU's energy).

    ``quantum`` (s) is the period of the counter the energy was read from: a window of ``t`` s
    reads what was drawn over ``t - quantum`` to ``t + quantum`` s, so 0 J over 20 ms, or a
    whole update over 20 ms, is a real reading and passes; long windows are held to the range.
    """

    numerator: str
    denominator: str
    quantity: Quantity = AVERAGE_POWER
    per: str | None = None
    when: Callable[[Row], bool] | None = None
    cap: Callable[[Row], float | None] | None = None
    cap_factor: float = 1.5
    units: tuple[str, str] = ("J", "s")
    fix: str = "check the units (energy in J, time in s)"
    quantum: float = 0.0

    def problem(self, row: Row) -> tuple[str, str] | None:
        if self.when is not None and not self.when(row):
            return None
        den = row.get(self.denominator)
        for name in [k for k in row if re.fullmatch(self.numerator, str(k))]:
            num = row.get(name)
            if num is None or den is None:
                continue
            share = (row.get(self.per) or 1) if self.per else 1
            ratio = num / share / den if den > 0 else math.inf
            q = self.quantity
            cap = self.cap(row) if self.cap is not None else None
            high = min(q.high, cap * self.cap_factor) if cap is not None else q.high
            if den > 0 and self.quantum > 0:  # what a counter of that period can read
                each = num / share
                fits = q.low * max(0.0, den - self.quantum) <= each <= high * (den + self.quantum)
            else:
                fits = q.low <= ratio <= high
            if not fits:
                per = f" per {self.per.replace('num_', '')[:-1]}" if self.per else ""
                why = f": the limit {cap:g} {q.unit} x {self.cap_factor:g}" if cap else ""
                (un, ud) = self.units
                counter = (
                    f", allowing for a counter that moves every {self.quantum:g} {ud}"
                    if self.quantum > 0 and den < 10 * self.quantum
                    else ""
                )
                return name, (
                    f"{num:g} {un} over {den:g} {ud} is {q.name} {ratio:.4g} {q.unit}{per}, "
                    f"out of range ({q.low:g} to {high:g} {q.unit}{why}{counter}); {self.fix}"
                )
        return None


@dataclass(frozen=True)
class RowCheck(Check):
    """Any other rule: ``rule(row)`` returns what is wrong (with what to do), or None."""

    rule: Callable[[Row], str | tuple[str, str] | None]

    def problem(self, row: Row) -> str | tuple[str, str] | None:
        return self.rule(row)


@dataclass(frozen=True)
class Spread:
    """Within each group of rows (``by``), ``column``'s largest value is at most ``max_ratio``
    times its smallest: one cell typed in ms among values in s stands out this way."""

    column: str
    by: tuple[str, ...]
    max_ratio: float = 20.0
    fix: str = "check the units of that cell"


@dataclass(frozen=True)
class Schema:
    """One kind of input: its columns (or fields), identity, and rules.

    ``key``: columns whose values identify a row, unique within a run. ``runs``: a line that
    repeats the header starts a new run (an appended log). ``appended``: the file is written by
    appending, so a last row without a line end is a write cut short and is dropped with a
    warning. ``comment``: lines starting with it are not data. ``extra``: ``"error"`` or
    ``"ignore"`` for columns the schema does not list. ``fix`` closes every error message.
    ``max_bytes`` bounds the file: reading and checking a row costs about 20 us, so 8 MiB (over
    100 000 rows) is read in seconds and a larger file is refused before any parsing.
    """

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    spreads: tuple[Spread, ...] = ()
    runs: bool = False
    appended: bool = False
    comment: str | None = None
    extra: str = "error"
    min_rows: int = 1
    fix: str = ""
    lead: tuple[str, ...] = field(default=())  # header must start with these, in this order
    max_bytes: int = 8 << 20  # a larger file is refused, not parsed (bounded time and memory)

    def column_for(self, header: str) -> Column | None:
        return next((c for c in self.columns if c.matches(header)), None)

    @property
    def required(self) -> list[Column]:
        return [c for c in self.columns if not c.optional and not c.pattern]

    def error(self, where: str, problem: str | tuple[str, str]) -> TraceFormatError:
        """Our error for ``where`` (file, line), closing with the schema's fix; a problem of
        ``(column, text)`` names the column too."""
        if isinstance(problem, tuple):
            where, problem = f"{where}, column {problem[0]}", problem[1]
        fix = f"; {self.fix}" if self.fix and self.fix not in problem else ""
        return TraceFormatError(f"{where}: {problem}{fix}")

    def check_row(self, row: Row, where: str) -> Row:
        """``row`` after the schema's rules over a whole row (the first broken one is raised)."""
        for check in self.checks:
            problem = check.problem(row)
            if problem:
                raise self.error(where, problem)
        return row

    def wrap(self, e: InputError) -> TraceFormatError:
        """A cell's :class:`InputError` as this schema's error (with its fix)."""
        text = str(e)
        fix = f"; {self.fix}" if self.fix and self.fix not in text else ""
        return TraceFormatError(text + fix)


def check_record(record: Any, schema: Schema, where: str, text_ok: bool = False) -> Row:
    """A JSON object or database row as a checked :class:`Row` (every field, every rule).

    Missing required fields, fields the schema does not list (unless ``extra="ignore"``) and
    values of the wrong type are errors naming ``where`` and the field.
    """
    if not isinstance(record, Mapping):
        raise schema.error(where, f"{_short(record)} is not an object with fields")
    missing = [c.name for c in schema.required if c.name not in record]
    if missing:
        raise schema.error(where, f"missing field(s) {', '.join(missing)}")
    row = Row()
    row.where = where
    for name, raw in record.items():
        col = schema.column_for(str(name))
        if col is None:
            if schema.extra == "error":
                raise schema.error(where, f"unexpected field {name!r}")
            row[name] = raw
            continue
        try:
            row[name] = col.parse(raw, f"{where}.{name}", text_ok)
        except InputError as e:
            raise schema.wrap(e) from None
    return schema.check_row(row, where)


def check_spreads(rows: Iterable[Row], schema: Schema, src: str) -> None:
    """Apply the schema's :class:`Spread` rules to checked rows."""
    rows = list(rows)
    for spread in schema.spreads:
        groups: dict[tuple, list[Row]] = {}
        for r in rows:
            if r.get(spread.column) is not None:
                groups.setdefault(tuple(r.get(b) for b in spread.by), []).append(r)
        for members in groups.values():
            values = [r[spread.column] for r in members]
            lo, hi = min(values), max(values)
            if lo > 0 and hi / lo > spread.max_ratio:
                odd = max(members, key=lambda r: abs(math.log(r[spread.column] / _median(values))))
                raise schema.error(
                    f"{src}, line {odd.line}, column {spread.column}",
                    f"{odd[spread.column]:g} is {hi / lo:.3g}x the other rows of "
                    f"{', '.join(f'{b}={odd.get(b)}' for b in spread.by)} (at most "
                    f"{spread.max_ratio:g}x is plausible); {spread.fix}",
                )


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
