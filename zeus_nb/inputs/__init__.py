"""The input boundary: every value from outside zeus-nb comes in through here.

* :mod:`~zeus_nb.inputs.schema` and :mod:`~zeus_nb.inputs.kinds`: one declared schema per kind
  of input (columns or fields, type, physical range and plausibility, identity, empty is an
  error);
* :mod:`~zeus_nb.inputs.table`: files (path mistakes, UTF-8 with or without BOM, CRLF, runs in
  appended logs, a torn last row) read through a schema;
* :mod:`~zeus_nb.inputs.env`: declared environment variables;
* :mod:`~zeus_nb.inputs.args`: command-line types and options tied to one choice;
* :mod:`~zeus_nb.inputs.registry`: the declared readers, which the tests enumerate.

Plain Python rather than a dataframe-schema library (pandera): the rules need the file's line
and column in every message, rows split into runs and a torn last row handled before any
parsing, and the same rules for CSV rows, JSON records, database rows and arguments; and the
command line must start fast on the base install. See docs/reliability.md.
"""

from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import READERS, reader
from zeus_nb.inputs.schema import Column, Ratio, Row, RowCheck, Schema, Spread, check_record
from zeus_nb.inputs.table import (
    Table,
    read_bytes,
    read_ipynb,
    read_json,
    read_table,
    read_text,
    regular_file,
)

__all__ = [
    "READERS",
    "Column",
    "Ratio",
    "Row",
    "RowCheck",
    "Schema",
    "Spread",
    "Table",
    "check_record",
    "env",
    "read_bytes",
    "read_json",
    "read_ipynb",
    "read_table",
    "read_text",
    "reader",
    "regular_file",
]
