"""The battery: every declared reader and every sub-command gets the same bad inputs.

Empty, blank, missing, a folder for a file, not UTF-8, a UTF-8 byte-order mark, CRLF line ends,
NaN, inf, negative, huge and wrong-typed values in every numeric cell, a duplicated row, a second
appended run, a last row cut short, a column written in ms or mJ, and a full disk. The property
everywhere: a correct result or our own error (a ``ZeusNbError`` or an ``OSError`` naming the
path), never a raw exception, never a changed input file, never a wrong number without an error.
``tests/test_reliability_discovery.py`` fails for a reader or sub-command missing here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import kinds
from zeus_nb.inputs.registry import READERS
from zeus_nb.inputs.schema import Schema

REPO = Path(__file__).resolve().parents[1]
RES = resources.files("zeus_nb") / "resources"
LOG = RES / "zeus_profiles" / "A40+resnet50+gpu0.csv"

# --- the sub-commands: a valid command line of each (the discovery test checks all are here) --
COMMANDS: dict[tuple[str, ...], dict[str, Any]] = {
    ("python -m zeus_nb.monitor", "energy"): {},
    ("python -m zeus_nb.monitor", "power"): {},
    ("zeus-nb", "bso", "serve"): {},
    ("zeus-nb", "bso", "show"): {"positionals": {"job": "j"}},
    ("zeus-nb", "bso", "simulate"): {"options": ["--workload", "cifar100"]},
    ("zeus-nb", "course", "build"): {"positionals": {"notebooks": ["nb"]}},
    ("zeus-nb", "course", "grade"): {"positionals": {"submissions": ["sub"]}},
    ("zeus-nb", "course", "slides"): {"positionals": {"notebooks": ["nb"]}},
    ("zeus-nb", "course", "timings"): {"positionals": {"paths": ["."]}},
    ("zeus-nb", "course", "verify"): {"positionals": {"dir": "course"}},
    ("zeus-nb", "demo"): {},
    ("zeus-nb", "docs", "build"): {"positionals": {"dir": "site"}},
    ("zeus-nb", "doctor"): {},
    ("zeus-nb", "lab"): {"positionals": {"dir": "nb", "jupyter_args": []}},
    ("zeus-nb", "notebooks"): {"positionals": {"dir": "nb"}},
    ("zeus-nb", "perseus", "plan"): {
        "positionals": {"profile": "p.csv"},
        "options": ["--stages", "2", "--microbatches", "4"],
    },
    ("zeus-nb", "perseus", "synthetic"): {"positionals": {"output": "p.csv"}},
    ("zeus-nb", "plo", "replay"): {"positionals": {"log": "log.csv"}},
    ("zeus-nb", "restore"): {},
    ("zeus-nb", "sweep"): {"positionals": {"notebook": "01"}},
    ("zeus-nb", "tour"): {},
    ("zeus-nb", "tradeoff", "pareto"): {"options": ["--workload", "imagenet"]},
    ("zeus-nb", "tradeoff", "savings"): {},
    ("zeus_nb.train.single",): {},
    ("zeus_nb.train.dp",): {},
    ("zeus_nb.train.fsdp",): {},
    ("zeus_nb.train.pipeline",): {},
}


def argv_for(path, spec: dict, action=None, bad: str | None = None) -> list[str]:
    """The command line of ``spec``, with ``action`` given the value ``bad``."""
    positionals = dict(spec.get("positionals", {}))
    argv = list(spec.get("options", []))
    if action is not None and action.option_strings:
        more = ["x"] * (action.nargs - 1) if isinstance(action.nargs, int) else []
        argv += [action.option_strings[0], bad, *more]
    elif action is not None:
        positionals[action.dest] = [bad] if action.nargs in ("*", "+") else bad
    for value in positionals.values():
        argv += value if isinstance(value, list) else [value]
    return argv


# --- the readers: a good sample of each, and how to call it -----------------------------------
@dataclass
class Case:
    """A reader under test: writes a good sample, reads a path into a comparable value."""

    schema: Schema
    sample: Callable[[Path], None]
    read: Callable[[Path], Any]
    form: str = "csv"  # csv, json, jsonl or sqlite
    units: tuple[str, ...] = ()  # columns whose values x1000 (ms, mJ, mW) must be refused
    empty_ok: bool = False  # an empty file means "nothing recorded yet" (resumable files)


def _copy(src) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(Path(str(src)).read_bytes())


def _profile_sample(p: Path) -> None:
    from zeus_nb.optimizer.pipeline_frequency import synthetic_profile

    synthetic_profile("a40", 2).to_csv(p)


def _train_sample(p: Path) -> None:
    lines = (RES / "zeus_traces" / "summary_train.csv").read_text().splitlines()
    p.write_text("\n".join(lines[:120]) + "\n")


def _json(obj) -> Callable[[Path], None]:
    return lambda p: p.write_text(json.dumps(obj, indent=1) + "\n")


PL_PROFILE = {
    "format": "zeus-nb power-limit profile",
    "version": 1,
    "gpu_model": "NVIDIA A40",
    "power_limit_constraints": [100.0, 300.0],
    "pl_step": 25,
    "selector": "ZeusCost(eta_knob=0.5)",
    "pruned_for": None,
    "optimal_power_limit": 200.0,
    "measurements": [
        {"power_limit": 300.0, "energy": 6224.9, "time": 24.01, "num_gpus": 1},
        {"power_limit": 200.0, "energy": 5017.5, "time": 25.19, "num_gpus": 1},
    ],
    "abandoned": {},
}
STATE = {
    "format": "zeus-nb device settings",
    "host": "somewhere-else",
    "pid": 4242,
    "backend": "sim",
    "cuda_visible_devices": None,
    "settings": [{"gpu": 0, "kind": "power_limit", "original": 200.0}],
}
RESULTS = [
    {"batch_size": 32, "power_limit": 150.0, "epochs": 2, "metric": 0.6, "reached": True,
     "time": 20.0, "energy": 3000.0, "num_gpus": 1, "target_metric": 0.5, "max_epochs": 5,
     "higher_is_better": True},
    {"batch_size": 64, "power_limit": 150.0, "epochs": 3, "metric": 0.4, "reached": False,
     "time": 30.0, "energy": 4000.0, "num_gpus": 1, "target_metric": 0.5, "max_epochs": 5,
     "higher_is_better": True},
]  # fmt: skip
PLAN_POINT = {"iteration_time": 0.8, "energy": 330.0, "plan": {"stages": []}}


def _jsonl(rows) -> Callable[[Path], None]:
    return lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _intensity_sample(p: Path) -> None:
    p.write_text(
        "time,value\n2024-05-01T00:00:00Z,400\n2024-05-01T01:00:00Z,350\n2024-05-01T02:00:00Z,380\n"
    )


def _power_log_sample(p: Path) -> None:
    rows = [f"2024-05-01 00:00:{s:02d}.000,{200000 + 1000 * s}" for s in range(10)]
    p.write_text("Time,Power\n" + "\n".join(rows) + "\n")


def _store_sample(p: Path) -> None:
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
    from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore

    with SQLiteStore(p) as store:
        bso = BatchSizeOptimizer(
            "j", store, batch_sizes=[8, 16], default_batch_size=16, max_power=300.0
        )
        bso.report(16, time=10.0, energy=2000.0, reached=True)
        bso.report(8, time=12.0, energy=2500.0, reached=False)


def _read_store(p: Path):
    from zeus_nb.optimizer.batch_size.store_url import open_store

    store = open_store(p, create=False)
    try:
        return store.jobs(), [o for _, o in store.observations("j")], store.job("j")
    finally:
        store.close()


def _read_log(p: Path):
    from zeus_nb.device.replay import load_profile_log

    log = load_profile_log(p)
    return log.elapsed, log.energy


def _read_profile(p: Path):
    from zeus_nb.optimizer.pipeline_frequency import load_profile

    prof = load_profile(p)
    return prof.measurements, prof.blocking_power


def _read_keys(p: Path):
    from zeus_nb.train.pipeline.profile import existing_keys

    return existing_keys(p)


def _read_pl_profile(p: Path):
    from zeus_nb.optimizer.power_limit.profile_file import ProfileKey, load_profile

    return load_profile(p, ProfileKey("NVIDIA A40", 100.0, 300.0, 25))


def _lazy(module: str, name: str, *args):
    def call(p: Path):
        import importlib

        return getattr(importlib.import_module(module), name)(p, *args)

    return call


def _traces():
    from zeus_nb.data.traces import load_power_trace, load_train_trace

    return load_power_trace, load_train_trace


CASES: dict[str, Case] = {
    "zeus_nb.device.replay.load_profile_log": Case(
        kinds.MONITOR_LOG, _copy(LOG), _read_log, units=("elapsed_time", "gpu0_energy")
    ),
    "zeus_nb.optimizer.pipeline_frequency.profile.load_profile": Case(
        kinds.INSTRUCTION_PROFILE, _profile_sample, _read_profile, units=("time", "energy")
    ),
    "zeus_nb.train.pipeline.profile.existing_keys": Case(
        kinds.INSTRUCTION_PROFILE,
        _profile_sample,
        _read_keys,
        units=("time", "energy"),
        empty_ok=True,
    ),
    "zeus_nb.optimizer.power_limit.profile_file.load_profile": Case(
        kinds.PL_MEASUREMENT, _json(PL_PROFILE), _read_pl_profile, "json", ("energy", "time")
    ),
    "zeus_nb.data.traces.load_power_trace": Case(
        kinds.POWER_TRACE,
        _copy(RES / "zeus_traces" / "summary_power_a40.csv"),
        lambda p: _traces()[0](str(p)).to_dict("list"),
        units=("time_per_epoch", "average_power"),
    ),
    "zeus_nb.data.traces.load_train_trace": Case(
        kinds.TRAIN_TRACE, _train_sample, lambda p: _traces()[1](str(p)).to_dict("list")
    ),
    "zeus_nb.monitor.providers.read_intensity_csv": Case(
        kinds.INTENSITY_CSV,
        _intensity_sample,
        _lazy("zeus_nb.monitor.providers", "read_intensity_csv"),
    ),
    "zeus_nb.device.recovery.read_state": Case(
        kinds.STATE_FILE, _json(STATE), _lazy("zeus_nb.device.recovery", "read_state"), "json"
    ),
    "zeus_nb.runner.sweep.read_results": Case(
        kinds.SWEEP_RESULT,
        _jsonl(RESULTS),
        _lazy("zeus_nb.runner.sweep", "read_results"),
        "jsonl",
        ("time", "energy"),
        empty_ok=True,
    ),
    "zeus_nb.runner.records._read_sidecar": Case(
        kinds.RECORDS_SIDECAR,
        _json({"records": {"energy": 1.5, "note": "x"}}),
        _lazy("zeus_nb.runner.records", "_read_sidecar"),
        "json",
    ),
    "zeus_nb.train.pipeline.plan.load_plan": Case(
        kinds.PLAN, _json(PLAN_POINT), _lazy("zeus_nb.train.pipeline.plan", "load_plan"), "json"
    ),
    "zeus_nb.utils.metric._power_log": Case(
        kinds.POWER_LOG, _power_log_sample, _lazy("zeus_nb.utils.metric", "_power_log", None, None)
    ),
    "zeus_nb.optimizer.batch_size.sqlite_store.SQLiteStore.__init__": Case(
        kinds.STORED_RUN, _store_sample, _read_store, "sqlite"
    ),
    "zeus_nb.optimizer.batch_size.sql_store.SQLStore.__init__": Case(
        kinds.STORED_RUN, _store_sample, _read_store, "server"
    ),
}

# Schemas no file reader uses: the arguments and answers they check, and the test that does.
API_SCHEMAS = {
    kinds.OBSERVATION.name: "tests/test_reliability_examples.py (report of an empty run)",
    kinds.FAILED_OBSERVATION.name: "tests/test_bso.py (a run that never started)",
    kinds.NOTEBOOK_SETUP.name: "test_notebook_setup_arguments_are_checked (below)",
    kinds.ELECTRICITYMAPS_POINT.name: "test_http_answers_go_through_their_schemas (below)",
    kinds.OPENEI_PERIOD.name: "test_http_answers_go_through_their_schemas (below)",
}


def test_every_declared_reader_has_a_case_and_every_schema_a_reader():
    from test_reliability_discovery import _import_all

    _import_all()  # every module's @reader declarations
    assert set(READERS) == set(CASES)
    read = {s.name for schemas in READERS.values() for s in schemas}
    assert set(kinds.SCHEMAS) - read == set(API_SCHEMAS)


# --- the mutations ---------------------------------------------------------------------------
BAD_VALUES = ["nan", "inf", "-inf", "-1", "1e300", "abc", ""]
JSON_BAD = [math.nan, math.inf, -1, 1e300, "5", None, True, [1]]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _data_rows(case: Case, data: bytes) -> list[int]:
    """Indexes (into ``_lines``) of the data rows of a CSV sample."""
    lines = _lines(data)
    body = [i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith(b"#")]
    return body[1:]  # after the header


def _csv_header(data: bytes) -> list[str]:
    first = next(ln for ln in _lines(data) if ln.strip() and not ln.startswith(b"#"))
    return first.decode().split(",")


def _set_cell(data: bytes, row: int, col: int, value: str) -> bytes:
    lines = _lines(data)
    cells = lines[row].decode().split(",")
    cells[col] = value
    lines[row] = ",".join(cells).encode()
    return b"\n".join(lines)


def _scale(data: bytes, case: Case, column: str) -> bytes:
    header = _csv_header(data)
    col = header.index(column)
    for row in _data_rows(case, data):
        cell = _lines(data)[row].decode().split(",")[col]
        if cell.strip():
            data = _set_cell(data, row, col, repr(float(cell) * 1000))
    return data


def _numeric_columns(case: Case, header: list[str]) -> list[int]:
    out = []
    for i, h in enumerate(header):
        col = case.schema.column_for(h)
        if col is not None and col.kind in ("number", "integer", "time"):
            out.append(i)
    return out


def _mutations(case: Case, good: bytes) -> list[tuple[str, bytes | None, str]]:
    """(name, bytes or None for 'no file', expectation): expectation is 'error', 'same',
    'same or error', 'checked' (error exactly when the schema refuses the value) or
    'dropped or error' (a torn last row)."""
    out: list[tuple[str, bytes | None, str]] = [
        ("empty", b"", "nothing or error" if case.empty_ok else "error"),
        ("blank", b"\n \n", "nothing or error" if case.empty_ok else "error"),
        ("missing", None, "nothing or error" if case.empty_ok else "error"),
        ("not utf-8", good[:20] + b"\xff\xfe" + good[20:], "error"),
        ("bom", b"\xef\xbb\xbf" + good, "same"),
        ("crlf", good.replace(b"\n", b"\r\n"), "same"),
        ("truncated", good[: len(good) - max(2, len(_lines(good)[-2]) // 2)], "dropped or error"),
    ]
    if case.form == "csv":
        rows = _data_rows(case, good)
        header = _csv_header(good)
        first = rows[0]
        for col in _numeric_columns(case, header):
            for v in BAD_VALUES:
                out.append((f"{header[col]}={v!r}", _set_cell(good, first, col, v), "checked"))
        dup = _lines(good)
        dup.insert(first + 1, dup[first])
        out.append(("duplicated row", b"\n".join(dup), "same or error"))
        out.append(("second run", good + good, "same or error"))
        for column in case.units:
            out.append((f"{column} x1000", _scale(good, case, column), "error"))
    elif case.form in ("json", "jsonl"):
        for name, mutated in _json_mutations(case, good):
            out.append((name, mutated, "checked"))
        if case.form == "jsonl":
            out.append(("duplicated row", good + _lines(good)[0] + b"\n", "same or error"))
            out.append(("second run", good + good, "same or error"))
        for column in case.units:
            out.append((f"{column} x1000", _json_scaled(case, good, column), "error"))
    return out


def _records(case: Case, obj) -> list[dict]:
    """The JSON objects the schema checks, inside the sample."""
    if case.form == "jsonl":
        return obj
    if case.schema is kinds.PL_MEASUREMENT:
        return obj["measurements"]
    return [obj]


def _load(case: Case, good: bytes):
    if case.form == "jsonl":
        return [json.loads(ln) for ln in good.decode().splitlines()]
    return json.loads(good)


def _dump(case: Case, obj) -> bytes:
    if case.form == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in obj).encode()
    return (json.dumps(obj, indent=1) + "\n").encode()


def _json_mutations(case: Case, good: bytes):
    obj = _load(case, good)
    for key, value in list(_records(case, obj)[0].items()):
        col = case.schema.column_for(key)
        if col is None or col.kind not in ("number", "integer"):
            continue
        for bad in JSON_BAD:
            copy = _load(case, good)
            _records(case, copy)[0][key] = bad
            yield f"{key}={bad!r}", _dump(case, copy)
        del value


def _json_scaled(case: Case, good: bytes, column: str) -> bytes:
    obj = _load(case, good)
    for rec in _records(case, obj):
        rec[column] = rec[column] * 1000
    return _dump(case, obj)


def _schema_refuses(case: Case, name: str) -> bool:
    """Whether the schema alone refuses the mutated value ``name`` (``column=value``)."""
    column, _, shown = name.partition("=")
    col = case.schema.column_for(column)
    value = eval(shown, {"nan": math.nan, "inf": math.inf})  # noqa: S307 - our own repr
    try:
        col.parse(value, "x", text_ok=case.form == "csv")
    except ZeusNbError:
        return True
    return False


def _canon(value: Any) -> str:
    """A comparable text of a reader's result (NaN equals NaN, sets in order)."""

    def plain(x: Any) -> Any:
        if isinstance(x, (set, frozenset)):
            return sorted(map(plain, x), key=repr)
        if isinstance(x, dict):
            return {repr(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        return repr(x)

    return json.dumps(plain(value), sort_keys=True)


@contextlib.contextmanager
def _deadline(seconds: int, what: str):
    """Fail (rather than hang the suite) when a read blocks: a FIFO, ``/dev/zero``."""

    def expired(*_):
        raise AssertionError(f"{what}: no answer within {seconds} s (a read that blocks)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


#: Inputs that are not regular files, or too large: every reader refuses them at once.
SPECIAL = ("a FIFO", "/dev/zero", "over the size bound")


def _special(case: Case) -> tuple[str, ...]:
    """SQLite reads the pages a query needs, not the whole file: its work is bounded anyway."""
    return SPECIAL[:2] if case.form in ("sqlite", "server") else SPECIAL


def _make_special(what: str, path: Path, case: Case, good: bytes) -> None:
    if what == "a FIFO":
        os.mkfifo(path)
    elif what == "/dev/zero":
        path.symlink_to("/dev/zero")
    else:  # the good file, padded past the bound with blank lines (or trailing bytes)
        limit = getattr(case.schema, "max_bytes", 8 << 20)
        pad = b"\n" if case.form in ("csv", "jsonl") else b" "
        path.write_bytes(good + pad * (limit + 1 - len(good)))


def _outcome(case: Case, path: Path):
    try:
        with _deadline(20, str(path)):
            return "ok", _canon(case.read(path))
    except ZeusNbError as e:
        return "error", str(e)
    except OSError as e:
        assert e.filename is not None, f"an OSError without the path: {e!r}"
        return "error", str(e)


@pytest.mark.parametrize("name", sorted(k for k, c in CASES.items() if c.form != "server"))
def test_every_reader_survives_the_battery(name, tmp_path, caplog):
    case = CASES[name]
    good_path = tmp_path / "good" / "input"
    good_path.parent.mkdir()
    case.sample(good_path)
    good = good_path.read_bytes()
    kind, clean = _outcome(case, good_path)
    assert kind == "ok", clean
    if case.form == "sqlite":
        mutations = [
            ("empty", b"", "error"),
            ("missing", None, "error"),
            ("text", b"time,value\n1,2\n", "error"),
            ("truncated", good[: len(good) // 2], "same or error"),
            ("bom", b"\xef\xbb\xbf" + good, "error"),
        ]
    else:
        mutations = _mutations(case, good)
    for i, (what, data, expect) in enumerate(mutations):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        path = folder / "input"
        if data is not None:
            path.write_bytes(data)
        kind, result = _outcome(case, path)
        label = f"{name}: {what}: {kind}: {str(result)[:300]}"
        if data is not None:
            assert path.read_bytes() == data, f"{label}: the input file changed"
        listing = sorted(p.name for p in folder.iterdir())
        assert listing == (["input"] if data is not None else []), label
        if expect == "error":
            assert kind == "error", label
        elif expect == "same":
            assert kind == "ok" and result == clean, label
        elif expect == "same or error":
            assert kind == "error" or result == clean, label
        elif expect == "nothing or error":
            assert kind == "error" or json.loads(result) in ([], {}), label
        elif expect == "dropped or error":
            assert kind == "error" or case.schema.appended, label
        elif expect == "checked" and _schema_refuses(case, what):
            assert kind == "error", label
    # a folder where the file should be
    kind, result = _outcome(case, tmp_path / "good")
    assert kind == "error" and str(tmp_path / "good") in str(result), result
    # not a regular file, or too large: refused at once, naming the path
    for what in _special(case):
        folder = tmp_path / f"special-{what.replace('/', '')}"
        folder.mkdir()
        path = folder / "input"
        _make_special(what, path, case, good)
        kind, result = _outcome(case, path)
        assert kind == "error" and str(path) in str(result), f"{name}: {what}: {kind}: {result}"
        assert sorted(p.name for p in folder.iterdir()) == ["input"], f"{name}: {what}"


def test_a_database_server_with_nothing_listening_fails_fast_with_our_error():
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("psycopg")
    import socket

    from zeus_nb.optimizer.batch_size.sql_store import CONNECT_TIMEOUT
    from zeus_nb.optimizer.batch_size.store import StoreError
    from zeus_nb.optimizer.batch_size.store_url import open_store

    assert CONNECT_TIMEOUT <= 10
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    for url in (f"postgresql://zeus@127.0.0.1:{port}/db", "postgresql://"):
        with pytest.raises(StoreError):
            open_store(url, create=False)


# --- file inputs through the command line -----------------------------------------------------
FILE_COMMANDS = {
    "plo replay": (
        "zeus_nb.device.replay.load_profile_log",
        lambda p: ["plo", "replay", str(p), "--json"],
    ),
    "perseus plan": (
        "zeus_nb.optimizer.pipeline_frequency.profile.load_profile",
        lambda p: ["perseus", "plan", str(p), "--stages", "2", "--microbatches", "4", "--json"],
    ),
    "tradeoff savings --gpu": (
        "zeus_nb.data.traces.load_power_trace",
        lambda p: ["tradeoff", "savings", "--gpu", str(p), "--json"],
    ),
    "bso show --store": (
        "zeus_nb.optimizer.batch_size.sqlite_store.SQLiteStore.__init__",
        lambda p: ["bso", "show", "j", "--store", str(p), "--json"],
    ),
}


@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
def test_commands_answer_every_bad_file_with_one_line(command, tmp_path, capsys):
    from zeus_nb.cli import main

    reader, argv = FILE_COMMANDS[command]
    case = CASES[reader]
    good_path = tmp_path / "good.input"
    case.sample(good_path)
    good = good_path.read_bytes()
    mutations = [m for m in _mutations(case, good) if m[1] is not None][:40]
    if case.form == "sqlite":
        mutations = [("text", b"a,b\n1,2\n", "error"), ("empty", b"", "error")]
    for i, (what, data, expect) in enumerate(mutations):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        path = folder / "input.csv"
        path.write_bytes(data)
        capsys.readouterr()
        code = main(argv(path))
        out, err = capsys.readouterr()
        label = f"{command}: {what}: exit {code}: {err.strip()[-300:]}"
        assert code in (0, 2), label  # never 3 (a bug) or a traceback
        assert "Traceback" not in err and "internal error" not in err, label
        if code == 2:
            assert err.strip().splitlines()[-1].startswith("zeus-nb: error: "), label
            assert out == "", label
        if expect == "error":
            assert code == 2, label
        assert path.read_bytes() == data, f"{label}: the input file changed"
        assert [p.name for p in folder.iterdir()] == ["input.csv"], label
    for what in _special(case):
        folder = tmp_path / f"special-{what.replace('/', '')}"
        folder.mkdir()
        path = folder / "input.csv"
        _make_special(what, path, case, good)
        capsys.readouterr()
        with _deadline(30, f"{command} {what}"):
            code = main(argv(path))
        out, err = capsys.readouterr()
        assert code == 2 and str(path) in err, f"{command}: {what}: exit {code}: {err[-300:]}"
        assert len(err.strip().splitlines()) == 1, err


def test_docs_name_every_schema_and_the_waits_they_state():
    """docs/reliability.md stays true: every schema is listed, and the bounds it states are
    the ones in the code."""
    doc = (REPO / "docs" / "reliability.md").read_text()
    listed = set()
    for line in doc.splitlines():
        if line.startswith("| `") and "read by" not in line:
            listed |= {c.strip().strip("`") for c in line.split("|")[1].split(",")}
    assert set(kinds.SCHEMAS) <= listed
    from zeus_nb.optimizer.batch_size.sql_store import CONNECT_TIMEOUT, LOCK_TIMEOUT
    from zeus_nb.runner.cluster import CONNECT_TIMEOUT as DASK_CONNECT

    assert f"a Dask scheduler gets {DASK_CONNECT.rstrip('s')} s" in doc
    assert f"a PostgreSQL server {CONNECT_TIMEOUT} s to connect and {LOCK_TIMEOUT:g} s" in doc
