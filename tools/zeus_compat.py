"""Which of Zeus's public names zeus-nb provides, checked by importing them.

The recorded API of a Zeus wheel (``tools/zeus_api/zeus-<version>.json``, made by
``tools/zeus_api.py record``) lists every public name. For each one, :func:`check` imports the
same path with ``zeus`` replaced by ``zeus_nb`` and compares signatures: every Zeus parameter
must exist with the same name, in the same position when Zeus's can be passed positionally, with
the same default; parameters zeus-nb adds must have defaults. Classes are compared by their
constructor, public methods, properties and fields. A name that cannot work here is listed in
:data:`UNSUPPORTED` (by module prefix or full name) with the reason; :data:`NOTES` says how a
supported name differs and :data:`DEVIATIONS` which reported differences are kept on purpose;
:data:`PLACEHOLDERS` lists names that exist so that imports work but
raise our one-line error when called or constructed, because they cannot work here (other
vendors' devices, Zeus's daemon). ``tests/test_zeus_compat.py`` fails on any other name, and
``docs/zeus_compat.md``'s table is generated from the same check, so it never claims more.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORD = HERE / "zeus_api" / "zeus-0.16.0.json"
DOC = HERE.parent / "docs" / "zeus_compat.md"
BEGIN, END = "<!-- zeus-api-table: begin -->", "<!-- zeus-api-table: end -->"
SUITE_BEGIN, SUITE_END = "<!-- zeus-suite: begin -->", "<!-- zeus-suite: end -->"
SUITE_SUMMARY = HERE / "zeus_suite" / "summary.json"

from zeus_compat_table import DEVIATIONS, NOTES, PLACEHOLDERS, UNSUPPORTED  # noqa: E402

STATUSES = ("ok", "placeholder", "unsupported", "missing")


@dataclass
class Row:
    zeus: str  # full Zeus name, e.g. zeus.monitor.energy.ZeusMonitor
    status: str  # "ok", "placeholder", "unsupported" or "missing"
    detail: str  # the reason, the note, or what is wrong


def ours(zeus_path: str) -> str:
    return "zeus_nb" + zeus_path[len("zeus") :]


def _lookup(table: dict[str, str], full: str) -> str | None:
    for key in sorted(table, key=len, reverse=True):
        if full == key or full.startswith(key + "."):
            return table[key]
    return None


def unsupported_reason(full: str) -> str | None:
    return _lookup(UNSUPPORTED, full)


def placeholder_reason(full: str) -> str | None:
    return _lookup(PLACEHOLDERS, full)


def _default_matches(text: str, value: object) -> bool:
    try:
        expected = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return repr(value).endswith(text.rsplit(".", 1)[-1]) or str(value) == text
    if isinstance(expected, (list, tuple)) and isinstance(value, (list, tuple)):
        return list(expected) == list(value)  # a tuple default stands for Zeus's list literal
    return type(expected) is type(value) and expected == value or expected is value


def compare_params(zeus_params: list[dict], sig: inspect.Signature) -> list[str]:
    """What keeps a call written for Zeus's parameters from working with ``sig``."""
    problems = []
    params = list(sig.parameters.values())
    by_name = {p.name: p for p in params}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    z_positional = [
        p["name"]
        for p in zeus_params
        if p["kind"] != "KEYWORD_ONLY" and not p["kind"].startswith("VAR")
    ]
    for z in zeus_params:
        if z["kind"].startswith("VAR"):
            kind = (
                inspect.Parameter.VAR_POSITIONAL
                if z["kind"] == "VAR_POSITIONAL"
                else inspect.Parameter.VAR_KEYWORD
            )
            if not any(p.kind == kind for p in params):
                problems.append(f"no {'*' if z['kind'] == 'VAR_POSITIONAL' else '**'}{z['name']}")
            continue
        p = by_name.get(z["name"])
        if p is None:
            if not any(q.kind == q.VAR_KEYWORD for q in params):
                problems.append(f"no parameter {z['name']}")
            continue
        if z["kind"] == "POSITIONAL_OR_KEYWORD":
            i = z_positional.index(z["name"])
            if i >= len(positional) or positional[i] != z["name"]:
                problems.append(f"{z['name']} is not positional parameter {i + 1}")
        if z["default"] is not None:
            if p.default is p.empty:
                problems.append(f"{z['name']} has no default (Zeus: {z['default']})")
            elif not _default_matches(z["default"], p.default):
                problems.append(f"{z['name']} defaults to {p.default!r} (Zeus: {z['default']})")
    zeus_names = {z["name"] for z in zeus_params}
    for p in params:
        extra = p.name not in zeus_names and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        if extra and p.default is p.empty:
            problems.append(f"extra required parameter {p.name}")
    return problems


def _signature(obj) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _has_field(cls: type, name: str) -> bool:
    if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
        return True
    if any(name in getattr(k, "__annotations__", {}) for k in cls.__mro__):
        return True
    if hasattr(cls, name) or name in getattr(cls, "model_fields", {}):
        return True
    sig = _signature(cls)
    return sig is not None and name in sig.parameters


def compare(info: dict, obj: object) -> list[str]:
    """How ``obj`` (zeus-nb's) falls short of the recorded Zeus name ``info``."""
    kind = info["kind"]
    if kind in ("constant", "reexport"):
        return []
    if kind == "function":
        sig = _signature(obj) if callable(obj) else None
        return ["not callable"] if sig is None else compare_params(info["params"], sig)
    if not inspect.isclass(obj):
        return ["not a class"]
    problems = []
    if "init" in info:
        sig = _signature(obj)
        problems += [f"constructor: {p}" for p in compare_params(info["init"], sig)] if sig else []
    for name, method in info["methods"].items():
        member = inspect.getattr_static(obj, name, None)
        if member is None:
            problems.append(f"no {'property' if method['kind'] == 'property' else 'method'} {name}")
        elif method["kind"] == "function":
            fn = getattr(obj, name)
            sig = _signature(fn)
            if sig is not None and isinstance(member, (staticmethod, classmethod)) is False:
                params = list(sig.parameters.values())[1:]  # drop self
                sig = sig.replace(parameters=params)
            problems += (
                [f"{name}(): {p}" for p in compare_params(method["params"], sig)] if sig else []
            )
    problems += [f"no field {f}" for f in info["fields"] if not _has_field(obj, f)]
    return problems


def check(record: Path = RECORD) -> list[Row]:
    """One row per recorded Zeus name."""
    api = json.loads(record.read_text())["modules"]
    rows = []
    for module, names in api.items():
        for name, info in names.items():
            full = f"{module}.{name}"
            reason = unsupported_reason(full)
            if reason is not None:
                rows.append(Row(full, "unsupported", reason))
                continue
            try:
                obj = getattr(importlib.import_module(ours(module)), name)
            except ImportError as e:
                rows.append(Row(full, "missing", f"cannot import {ours(module)}: {e}"))
                continue
            except AttributeError:
                rows.append(Row(full, "missing", f"{ours(module)} has no {name}"))
                continue
            if placeholder_reason(full) is not None:
                rows.append(Row(full, "placeholder", placeholder_reason(full)))
                continue
            accepted = DEVIATIONS.get(full, {})
            problems = [p for p in compare(info, obj) if p not in accepted]
            if problems:
                rows.append(Row(full, "missing", "; ".join(problems)))
            else:
                notes = [NOTES.get(full, ""), *accepted.values()]
                rows.append(Row(full, "ok", " ".join(n for n in notes if n)))
    return rows


def table(rows: list[Row]) -> str:
    """The Markdown tables of docs/zeus_compat.md, one per Zeus module, after a summary line."""
    count = {s: sum(r.status == s for r in rows) for s in STATUSES}
    out = [
        f"{len(rows)} public names: {count['ok']} import from the same path with a compatible "
        f"signature, {count['placeholder']} import and raise (cannot work here), "
        f"{count['unsupported']} unsupported, {count['missing']} missing."
    ]
    module = None
    for row in rows:
        mod, name = row.zeus.rsplit(".", 1)
        if mod != module:
            module = mod
            out += ["", f"### `{mod}`", "", "| name | in zeus-nb | notes |", "|---|---|---|"]
        where = {
            "ok": f"`{ours(row.zeus)}`",
            "placeholder": "raises (cannot work here)",
            "unsupported": "unsupported",
            "missing": "**missing**",
        }
        out.append(f"| `{name}` | {where[row.status]} | {row.detail.replace('|', '/')} |")
    return "\n".join(out).strip() + "\n"


def suite_section(summary: dict) -> str:
    """What Zeus's own unit tests give against zeus-nb: per-file counts and every failing test.

    ``summary`` is what ``tools/zeus_suite/run.py --update`` recorded (``summary.json``); the
    reasons come from ``tools/zeus_suite/known_failures.py``.
    """
    sys.path.insert(0, str(HERE / "zeus_suite"))
    from known_failures import KNOWN_FAILURES

    t = summary["totals"]
    failing = summary["not_passing"]
    out = [
        f"{summary['collected']} tests collected from `{summary['wheel']}` "
        f"({len(summary['files'])} files, {len(summary['collection_errors'])} not collected): "
        f"{t['passed']} passed, {t['failed']} failed, {t['error']} errors, "
        f"{t['skipped']} skipped.",
        "",
        "| test file | passed | failed | errors | skipped |",
        "|---|---|---|---|---|",
    ]
    for name, c in summary["files"].items():
        out.append(f"| `{name}` | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} |")
    for name, why in summary["collection_errors"].items():
        out.append(f"| `{name}` | not collected: {why.replace('|', '/')} | | | |")
    out.append("")
    if failing:
        out += ["Tests that fail here, and why:", "", "| test | outcome | why |", "|---|---|---|"]
        for nodeid, entry in failing.items():
            known = KNOWN_FAILURES.get(nodeid)
            why = known.why if known else "**not explained**"
            out.append(f"| `{nodeid}` | {entry['outcome']} | {why.replace('|', '/')} |")
    else:
        out.append("Every collected test passes or is skipped by Zeus's own conditions.")
    return "\n".join(out).strip() + "\n"


def rendered_doc(rows: list[Row], summary: dict | None = None) -> str:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    text = f"{head}{BEGIN}\n{table(rows)}{END}{tail}"
    if summary is None and SUITE_SUMMARY.is_file():
        summary = json.loads(SUITE_SUMMARY.read_text())
    if summary is not None and SUITE_BEGIN in text:
        head, rest = text.split(SUITE_BEGIN, 1)
        _, tail = rest.split(SUITE_END, 1)
        text = f"{head}{SUITE_BEGIN}\n{suite_section(summary)}{SUITE_END}{tail}"
    return text


def write_doc() -> str:
    rows = check()
    DOC.write_text(rendered_doc(rows))
    counts = {
        s: sum(r.status == s for r in rows) for s in ("ok", "placeholder", "unsupported", "missing")
    }
    return f"{DOC}: {counts}"
