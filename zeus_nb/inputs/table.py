"""Reading an input file through its schema: the one way outside files come in.

:func:`read_text` turns every way a path can be wrong (empty, missing, a folder, unreadable, not
UTF-8) into our error naming it, and accepts what editors produce (a UTF-8 byte-order mark,
CRLF line ends). :func:`read_table` parses CSV text through a
:class:`~zeus_nb.inputs.schema.Schema`: the header, every cell, every row rule, identity columns
unique within a run, a repeated header starting a new run, and a last row cut short by an
interrupted append dropped with a warning.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from zeus_nb.errors import (
    InputError,
    TraceFormatError,
)
from zeus_nb.inputs.schema import Column, Row, Schema, check_record, check_spreads
from zeus_nb.inputs.source import (  # noqa: F401 (re-exported: the boundary's readers)
    MAX_BYTES,
    MAX_NOTEBOOK_BYTES,
    _a,
    read_bytes,
    read_ipynb,
    read_json,
    read_text,
    regular_file,
)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_BYTES",
    "Table",
    "read_bytes",
    "read_header",
    "read_json",
    "read_ipynb",
    "read_table",
    "read_text",
    "regular_file",
    "check_rows",
    "complete_row",
    "split_torn",
]


def read_header(path: str | Path, schema: Schema) -> list[str] | None:
    """The header of an existing file of ``schema`` (None: no file, or an empty one), read
    without the rest: an appender checks it matches what it writes."""
    p = regular_file(path, schema.name, max_bytes=None, missing_ok=True)
    if p is None:
        return None
    try:
        with p.open(encoding="utf-8-sig", newline="") as f:
            for cells in csv.reader(f):
                if cells and not (schema.comment and cells[0].startswith(schema.comment)):
                    return [c.strip() for c in cells]
    except (UnicodeDecodeError, csv.Error) as e:
        raise TraceFormatError(f"{p}: not {_a(schema.name)} ({e}); choose another file") from None
    return None


@dataclass
class Table:
    """A checked table: its runs (each a list of :class:`Row`), header and comment lines."""

    path: str
    header: list[str]
    runs: list[list[Row]]
    comments: list[str] = field(default_factory=list)
    dropped: str | None = None  # a last row without a line end, dropped

    @property
    def rows(self) -> list[Row]:
        return [r for run in self.runs for r in run]


def split_torn(text: str, schema: Schema, src: str) -> tuple[str, str | None]:
    """The text without a last row that has no line end (and that row).

    Files zeus-nb appends to end every row with a line end, so such a row is a write cut short
    (a full disk, a killed process), whose last number may be cut and still parse: the reader
    drops it with a warning (:func:`read_table`) and leaves the file alone. Before appending,
    zeus-nb's writers end it with a line break if it is a complete row (a file an editor saved
    without its last line end), so a repair never deletes a whole row. In any other file it may
    be a copy cut short: refused.
    """
    if not text or text.endswith(("\n", "\r")):
        return text, None
    cut = max(text.rfind("\n"), text.rfind("\r")) + 1
    torn = text[cut:]
    line = text[:cut].count("\n") + 1
    if not schema.appended:
        raise schema.error(
            f"{src}, line {line}",
            "the last row has no line end, so the file may be cut short; if it is complete, "
            "end it with a line break",
        )
    if cut == 0:
        raise schema.error(src, "the file holds one line without a line end, so it is cut short")
    return text[:cut], torn


def complete_row(line: str, header: list[str], schema: Schema, where: str) -> Row | None:
    """``line`` as a checked row if it has every field of ``header`` and passes ``schema``
    (a last row without its line end that is nevertheless whole), else None."""
    try:
        cells = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return None
    cells = [c.strip() for c in cells]
    if len(cells) != len(header) or cells == header:
        return None
    try:
        return _row(cells, header, _columns(header, schema, where, 1), schema, where)
    except InputError:
        return None


def check_rows(
    text: str,
    schema: Schema,
    header: list[str] | None,
    where: str,
    keys: set[tuple] | None = None,
    quiet: bool = False,
) -> list[Row]:
    """The rows a writer is about to append, checked as ``schema``'s reader will check them.

    CSV rows go under ``header`` (``text`` may start with the header itself, for a new file);
    with ``header`` None, ``text`` is JSON lines. A row that repeats one of ``keys`` (the
    identities already in the file's current run) is refused too. ``quiet``: return [] instead
    of raising.
    """
    try:
        if header is None:
            rows = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    rows.append(check_record(json.loads(line), schema, f"{where}, new row {n}"))
        else:
            first = next((ln for ln in text.splitlines() if ln.strip()), "")
            body = text if first.split(",") == header else ",".join(header) + "\n" + text
            table = read_table(where, replace(schema, min_rows=0), text=body)
            rows = table.rows
        for row in rows:
            key = tuple(row.get(k) for k in schema.key)
            if schema.key and keys is not None and key in keys:
                same = ", ".join(f"{k}={v}" for k, v in zip(schema.key, key, strict=True))
                raise schema.error(where, f"a row repeats {same}, which the file already holds")
    except (InputError, ValueError) as e:
        if quiet:
            return []
        raise InputError(f"{where}: not written, since its reader would refuse it: {e}") from None
    return rows


def _dropped(torn: str, n: int, src: str) -> None:
    log.warning(
        "%s, line %d: the last row has no line end (a write cut short: a full disk or a killed "
        "process), so its last number may be cut: dropped it: %r (if it is complete, end it "
        "with a line break; zeus-nb's own appenders do so before they write)",
        src,
        n,
        torn[:60],
    )


def _columns(header: list[str], schema: Schema, src: str, line: int) -> list[Column]:
    if schema.lead and header[: len(schema.lead)] != list(schema.lead):
        raise schema.error(
            f"{src}, line {line}",
            f"not {_a(schema.name)}: the header must start with {','.join(schema.lead)}",
        )
    if len(set(header)) != len(header):
        twice = sorted({h for h in header if header.count(h) > 1})
        raise schema.error(f"{src}, line {line}", f"column(s) {', '.join(twice)} appear twice")
    cols = []
    for h in header:
        col = schema.column_for(h)
        if col is None:
            if schema.extra == "error":
                want = ", ".join(c.name for c in schema.columns)
                raise schema.error(
                    f"{src}, line {line}", f"unexpected column {h!r}; the columns are {want}"
                )
            col = Column(h, kind="any", empty_ok=True)
        cols.append(col)
    missing = [c.name for c in schema.required if c.name not in header]
    missing += [c.name for c in schema.columns if c.pattern and not c.optional
                and not any(c.matches(h) for h in header)]  # fmt: skip
    if missing:
        raise schema.error(
            f"{src}, line {line}",
            f"the header lacks column(s) {', '.join(missing)}; expected the columns "
            f"{', '.join(c.name for c in schema.columns)}",
        )
    return cols


def _row(cells: list[str], header: list[str], cols: list[Column], schema: Schema, where: str):
    row = Row()
    for h, col, cell in zip(header, cols, cells, strict=True):
        try:
            row[h] = col.parse(cell, f"{where}, column {h}")
        except InputError as e:
            raise schema.wrap(e) from None
    return schema.check_row(row, where)


def read_table(path: str | Path, schema: Schema, text: str | None = None) -> Table:
    """Read ``path`` (or the given ``text``) as a CSV table of ``schema``; every cell checked."""
    src = str(path)
    if text is None:
        text = read_text(path, schema.name, schema.max_bytes)
    if not text.strip():
        raise schema.error(src, f"the file is empty; expected {_a(schema.name)}")
    text, torn = split_torn(text, schema, src)
    header: list[str] | None = None
    cols: list[Column] = []
    comments: list[str] = []
    runs: list[list[Row]] = [[]]
    keys: dict[tuple, int] = {}
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise schema.error(f"{src}, line {reader.line_num}", f"not CSV ({e})") from None
        n = reader.line_num
        if not cells or not "".join(cells).strip():
            continue
        if schema.comment and cells[0].lstrip().startswith(schema.comment):
            comments.append(",".join(cells).lstrip()[len(schema.comment) :].strip())
            continue
        cells = [c.strip() for c in cells]
        if header is None:
            header, cols = cells, _columns(cells, schema, src, n)
            continue
        if cells == header:
            if not schema.runs:
                raise schema.error(f"{src}, line {n}", "the header repeats; delete that line")
            runs.append([])
            keys.clear()
            continue
        where = f"{src}, line {n}"
        if len(cells) != len(header):
            raise schema.error(
                where,
                f"{len(cells)} fields, expected {len(header)} ({','.join(header)}); the row is "
                "cut short or has extra cells",
            )
        row = _row(cells, header, cols, schema, where)
        row.line, row.run, row.where = n, len(runs), where
        if schema.key:
            key = tuple(row.get(k) for k in schema.key)
            if key in keys:
                same = ", ".join(f"{k}={v}" for k, v in zip(schema.key, key, strict=True))
                fix = "delete the duplicate"
                if schema.runs:  # two runs appended without the header line between them
                    fix += ", or copy the header line above it if another run starts there"
                raise schema.error(where, f"repeats line {keys[key]} ({same}); {fix}")
            keys[key] = n
        runs[-1].append(row)
    if torn is not None:
        _dropped(torn, text.count("\n") + 1, src)
    if header is None:
        raise schema.error(src, f"no header line; expected {_a(schema.name)}")
    runs = [r for r in runs if r]
    if sum(len(r) for r in runs) < schema.min_rows:
        raise schema.error(src, f"holds no data rows; expected {_a(schema.name)}")
    for run in runs:
        check_spreads(run, schema, src)
    return Table(src, header, runs, comments, torn)
