"""Property-based tests: every parser of outside input either returns valid values or raises
our own error (a ZeusNbError), never a raw exception and never a silently wrong value.

Inputs mix plausible values with the adversarial ones a damaged file or a careless user
produces: NaN, infinities, negatives, huge numbers, empty cells, text, truncation and bytes that
are not UTF-8.
"""

from __future__ import annotations

import itertools
import json
import math
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from zeus_nb import device
from zeus_nb.data.traces import POWER_COLUMNS, load_power_trace
from zeus_nb.device.recovery import read_state
from zeus_nb.device.replay import load_profile_log
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import check_record, read_table, validate
from zeus_nb.inputs.kinds import SCHEMAS
from zeus_nb.runner.records import read_notebook

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_names = itertools.count()

# Cells as text: good numbers, and every kind of bad one.
nasty_text = st.sampled_from(
    ["nan", "NaN", "inf", "-inf", "Infinity", "", " ", "-0", "0", "1e309", "-1", "abc", "1,5",
     "0x10", "1e-300", "\u0661\u0662", "None", "true"]
)  # fmt: skip
number_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=1e-3, max_value=1e4).map(repr),
    st.integers(-(10**20), 10**20).map(str),
    nasty_text,
)
any_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    number_text,
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _fresh(tmp_path: Path, suffix: str) -> Path:
    return tmp_path / f"f{next(_names)}{suffix}"


def _mangle(data: bytes, cut: int | None, garbage: bytes) -> bytes:
    """Optionally cut the file short and splice in bytes that may not be UTF-8."""
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    if garbage:
        mid = len(data) // 2
        data = data[:mid] + garbage + data[mid:]
    return data


mangling = st.tuples(
    st.none() | st.integers(0, 10**6), st.sampled_from([b"", b"\xff\xfe", b"\x00"])
)


# --- the shared validator -------------------------------------------------------------------
QUANTITIES = [validate.POWER_LIMIT, validate.AVERAGE_POWER, validate.DURATION, validate.ENERGY]


@SETTINGS
@given(value=any_value, quantity=st.sampled_from([None, *QUANTITIES]))
def test_number_is_finite_and_in_range_or_our_error(value, quantity):
    try:
        x = validate.number(value, "parameter x", quantity)
    except ZeusNbError as e:
        assert "parameter x" in str(e)
        return
    assert isinstance(x, float) and math.isfinite(x)
    assert not isinstance(value, (bool, list, dict)) and value is not None
    if quantity is not None:
        assert quantity.low <= x <= quantity.high
        assert not (quantity.open_low and x == quantity.low)


@SETTINGS
@given(value=any_value, low=st.none() | st.integers(-5, 5), span=st.none() | st.integers(0, 9))
def test_integer_is_an_int_in_range_or_our_error(value, low, span):
    high = None if low is None or span is None else low + span
    try:
        x = validate.integer(value, "variable N", low, high)
    except ZeusNbError as e:
        assert "variable N" in str(e)
        return
    assert type(x) is int
    # nothing rounded away (Python compares int and float exactly, so no float() on huge ints)
    assert x == (int(value.strip()) if isinstance(value, str) else value)
    assert (low is None or x >= low) and (high is None or x <= high)


# --- ZeusMonitor profiling logs -------------------------------------------------------------
row_values = st.tuples(
    st.sampled_from(["__GlobalPowerLimitOptimizer_{}", "other"]),
    st.sampled_from(["300", "250", "200", "nan", "0", "-100", "1e9", "x"]),
    number_text,
    number_text,
)


@SETTINGS
@given(rows=st.lists(row_values, max_size=6), mangle=mangling)
def test_profile_log_parses_to_checked_values_or_our_error(tmp_path, rows, mangle):
    lines = ["start_time,window_name,elapsed_time,gpu0_energy"]
    lines += [f"{n},{w.format(limit)},{t},{e}" for n, (w, limit, t, e) in enumerate(rows)]
    data = ("\n".join(lines) + "\n").encode()
    mangled = _mangle(data, *mangle)
    path = _fresh(tmp_path, ".csv")
    path.write_bytes(mangled)
    try:
        log = load_profile_log(path)
    except ZeusNbError as e:
        assert str(path) in str(e)
        return
    # Parsed: recompute the expected profile from the rows, independently of the parser.
    if mangled != data:  # only a cut (spliced bytes are refused): its torn last row dropped
        assert mangle[1] == b"" and data.startswith(mangled)
        whole = mangled[: mangled.rfind(b"\n") + 1]
        rows = rows[: max(0, whole.count(b"\n") - 1)]
    want_t: dict[float, float] = {}
    want_e: dict[float, float] = {}
    for w, limit, t, e in rows:
        if w == "other":
            continue
        # a limit twice in one run (two runs or pieces, untold apart) is refused, never summed
        assert float(limit) not in want_t, "a limit logged twice in one run was parsed"
        want_t[float(limit)], want_e[float(limit)] = float(t), float(e)
    assert log.elapsed == pytest.approx(want_t)
    assert {w: v[0] for w, v in log.energy.items()} == pytest.approx(want_e)
    for w, t in log.elapsed.items():
        assert 0 < w <= 2000 and math.isfinite(t) and t > 0
        assert 1 <= log.energy[w][0] / t <= 2000


# --- power traces ---------------------------------------------------------------------------
@SETTINGS
@given(
    cells=st.lists(
        st.tuples(st.sampled_from(["32", "64", "0", "-8", "1.5", "nan"]), number_text, number_text,
                  number_text),
        min_size=1,
        max_size=4,
    ),
    mangle=mangling,
)  # fmt: skip
def test_power_trace_parses_to_checked_values_or_our_error(tmp_path, cells, mangle):
    lines = [",".join(POWER_COLUMNS)]
    lines += [f"toy,mlp,{b},sgd,{pl},{t},{p}" for b, pl, t, p in cells]
    path = _fresh(tmp_path, ".csv")
    path.write_bytes(_mangle(("\n".join(lines) + "\n").encode(), *mangle))
    try:
        df = load_power_trace(path)
    except ZeusNbError as e:
        assert str(path) in str(e)
        return
    for col, q in (
        ("power_limit", validate.POWER_LIMIT),
        ("average_power", validate.AVERAGE_POWER),
        ("time_per_epoch", validate.DURATION),
    ):
        values = df[col].to_numpy(float)
        assert ((values > q.low) | ((values == q.low) & (not q.open_low))).all()
        assert (values <= q.high).all()
    assert (df["batch_size"] >= 1).all()


def test_an_edited_trace_is_read_again(tmp_path):
    path = tmp_path / "trace.csv"
    head = ",".join(POWER_COLUMNS) + "\n"
    path.write_text(head + "toy,mlp,32,sgd,100,10.0,90.0\n")
    assert load_power_trace(path)["average_power"].tolist() == [90.0]
    path.write_text(head + "toy,mlp,32,sgd,100,10.0,95.25\n")
    assert load_power_trace(path)["average_power"].tolist() == [95.25]


# --- state files ----------------------------------------------------------------------------
@SETTINGS
@given(
    pid=any_value,
    gpu=any_value,
    original=any_value,
    kind=st.sampled_from(["power_limit", "nope", 3]),
    legacy=st.booleans(),
    mangle=mangling,
)
def test_state_file_reads_to_checked_values_or_our_error(
    tmp_path, pid, gpu, original, kind, legacy, mangle
):
    if legacy:
        state = {
            "format": "zeus-nb power-limit state",
            "host": socket.gethostname(),
            "pid": pid,
            "gpus": [{"index": gpu, "power_limit": original}],
        }
    else:
        state = {
            "format": "zeus-nb device settings",
            "host": socket.gethostname(),
            "pid": pid,
            "settings": [{"gpu": gpu, "kind": kind, "original": original}],
        }
    path = _fresh(tmp_path, ".json")
    path.write_bytes(_mangle(json.dumps(state).encode(), *mangle))
    try:
        got = read_state(path)
    except ZeusNbError as e:
        assert str(path) in str(e)
        return
    assert type(got["pid"]) is int and got["pid"] >= 1
    (entry,) = got["settings"]
    assert type(entry["gpu"]) is int and entry["gpu"] >= 0
    if entry["kind"] == "power_limit":
        assert isinstance(entry["original"], float) and 1 < entry["original"] <= 2000


# --- environment variables ------------------------------------------------------------------
@SETTINGS
@given(
    var=st.sampled_from(
        ["ZEUS_NB_SIM_NOISE", "ZEUS_NB_SIM_SEED", "ZEUS_NB_SIM_GPUS", "ZEUS_NB_SIM_BATCH_SIZE"]
    ),
    value=number_text,
)
def test_sim_environment_gives_a_checked_system_or_our_error(var, value):
    assume("\x00" not in value)
    device.reset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(var, value)
        try:
            system = device.current("sim")
        except ZeusNbError as e:
            assert var in str(e)
            return
    assert 0 <= system.noise <= 1 and 1 <= len(system.gpus) <= 1024
    assert system.batch_size in system.batch_sizes
    system.step(3)
    assert math.isfinite(system.clock()) and system.clock() > 0
    assert all(math.isfinite(g.energy()) and g.energy() > 0 for g in system.gpus)


# --- records sidecars -----------------------------------------------------------------------
@SETTINGS
@given(
    body=st.one_of(
        st.just({"records": {"a": 1.5}}),
        st.dictionaries(st.sampled_from(["records", "x"]), any_value, max_size=2),
        any_value,
    ),
    mangle=mangling,
)
def test_records_sidecar_reads_or_our_error(tmp_path, body, mangle):
    path = _fresh(tmp_path, ".records.json")
    data = json.dumps(body).encode()
    path.write_bytes(_mangle(data, *mangle))
    try:
        info = read_notebook(path)
    except ZeusNbError as e:
        assert str(path) in str(e)
        return
    assert info["records"] == json.loads(path.read_text())["records"]


# --- sweep grids (-p NAME VALUES) -------------------------------------------------------------
grid_text = st.one_of(
    st.lists(number_text, min_size=0, max_size=4).map(",".join),
    st.text(max_size=20),
    st.sampled_from(["[" * 200 + "]" * 200, "9" * 5000, "1,,2", ",", "(1,2)", "{'a': 1}"]),
)


@SETTINGS
@given(text=grid_text, type_name=st.sampled_from([None, "int", "float", "bool", "str", "None"]))
def test_sweep_values_parse_to_typed_values_or_our_error(text, type_name):
    from zeus_nb.runner.notebooks import parse_values

    try:
        values = parse_values(text, type_name, "knob")
    except ZeusNbError as e:
        assert "'knob'" in str(e)
        return
    assert values
    want = {"int": int, "float": float, "bool": bool, "str": str}.get(type_name or "")
    for v in values:
        if want is not None:  # a text parameter may also take a list: [300,200]
            assert type(v) is want or (want is str and type(v) is list), (type_name, v)
        if isinstance(v, float):
            assert math.isfinite(v)


@SETTINGS
@given(
    grid=st.dictionaries(
        st.sampled_from(["a", "b", "c"]), st.lists(st.integers(), max_size=3), max_size=3
    )
)
def test_grid_points_cover_every_combination_or_our_error(grid):
    from zeus_nb.runner.notebooks import grid_points

    try:
        points = grid_points(grid)
    except ZeusNbError:
        assert any(not v for v in grid.values())
        return
    assert len(points) == math.prod(len(v) for v in grid.values())
    for p in points:
        assert all(p[k] in grid[k] for k in grid)


# --- notebook parameters --------------------------------------------------------------------
@SETTINGS
@given(value=st.one_of(any_value, st.lists(any_value, max_size=3)), integers=st.booleans())
def test_notebook_number_lists_are_checked_or_our_error(value, integers):
    try:
        got = validate.number_list(value, "live_power_limits", validate.POWER_LIMIT, integers)
    except ZeusNbError as e:
        assert "notebook parameter live_power_limits" in str(e)
        return
    assert got
    for x in got:
        if integers:
            assert type(x) is int and x >= 1
        else:
            assert isinstance(x, float) and 1 < x <= 2000


@SETTINGS
@given(value=any_value, low=st.sampled_from([0, 1]))
def test_notebook_counts_are_whole_numbers_or_our_error(value, low):
    try:
        (got,) = validate.notebook_counts(low, epochs=value)
    except ZeusNbError as e:
        assert "notebook parameter epochs" in str(e)
        return
    assert type(got) is int and low <= got <= 10**9
    # the value meant exactly that whole number (no rounding of 2.5, no True as 1)
    assert not isinstance(value, bool)
    assert float(str(value).strip()) == got if isinstance(value, str) else value == got


# --- every declared schema ------------------------------------------------------------------
def _satisfies(col, value) -> bool:
    """Whether a checked value fits its column's declaration."""
    if value is None:
        return col.empty_ok
    kind = col.kind
    if kind == "number":
        q = col.quantity
        ok = isinstance(value, float) and math.isfinite(value)
        if ok and q is not None:
            ok = (value > q.low if q.open_low else value >= q.low) and value <= q.high
        return ok
    if kind == "integer":
        return (
            type(value) is int
            and (col.low is None or value >= col.low)
            and (col.high is None or value <= col.high)
        )
    if kind == "integers":
        return (
            isinstance(value, tuple)
            and bool(value)
            and all(type(v) is int and col.low <= v <= col.high for v in value)
        )
    if kind == "bool":
        return type(value) is bool
    if kind == "choice":
        return value in col.choices
    if kind == "time":
        return isinstance(value, float) and math.isfinite(value)
    if kind == "text":
        return isinstance(value, str) and value.strip() == value and value != ""
    return True


def _column_value(col):
    """Plausible and adversarial values for one column."""
    good = st.nothing()
    if col.kind == "number" and col.quantity is not None:
        q = col.quantity
        good = st.floats(q.low, min(q.high, q.low + 1e4), allow_nan=False)
    elif col.kind == "integer":
        good = st.integers(col.low if col.low is not None else -5, (col.low or 0) + 100)
    elif col.kind == "choice":
        good = st.sampled_from(col.choices)
    elif col.kind == "bool":
        good = st.booleans()
    elif col.kind == "text":
        good = st.sampled_from(["toy", "mlp", "a40"])
    elif col.kind == "integers":
        good = st.lists(st.integers(1, 512), min_size=1, max_size=3)
    elif col.kind == "time":
        good = st.sampled_from(["2024-05-01T00:00:00Z", 1714521600.0])
    return st.one_of(good, any_value)


def _name(col) -> str:
    return "gpu0_energy" if col.pattern else col.name


@SETTINGS
@given(data=st.data(), schema=st.sampled_from(sorted(SCHEMAS.values(), key=lambda s: s.name)))
def test_every_schema_checks_a_record_or_refuses_it(data, schema):
    """JSON records, database rows and arguments: checked values, or our error naming them."""
    record = {}
    for col in schema.columns:
        if col.optional and data.draw(st.booleans()):
            continue
        record[_name(col)] = data.draw(_column_value(col))
    try:
        row = check_record(record, schema, "record")
    except ZeusNbError as e:
        assert str(e).startswith("record")
        return
    for key, value in row.items():
        col = schema.column_for(str(key))
        if col is not None:
            assert _satisfies(col, value), (key, value)


# every schema can come as a table but the two whose columns hold lists (job settings)
CSV_SCHEMAS = [s for s in SCHEMAS.values() if all(c.kind != "integers" for c in s.columns)]


@SETTINGS
@given(
    data=st.data(),
    schema=st.sampled_from(sorted(CSV_SCHEMAS, key=lambda s: s.name)),
    mangle=mangling,
)
def test_every_schema_reads_a_csv_table_or_refuses_it(tmp_path, data, schema, mangle):
    """A CSV of the schema's columns with any cells: checked rows, or our error naming the
    file."""
    columns = [c for c in schema.columns if not (c.optional and data.draw(st.booleans()))]
    header = [_name(c) for c in columns]
    rows = data.draw(
        st.lists(st.tuples(*(number_text | st.sampled_from(["toy", "forward", "true",
                                                             "2024-05-01T00:00:00Z"])
                             for _ in columns)), min_size=0, max_size=4)
    )  # fmt: skip
    text = "\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n"
    path = _fresh(tmp_path, ".csv")
    path.write_bytes(_mangle(text.encode(), *mangle))
    try:
        table = read_table(path, schema)
    except ZeusNbError as e:
        assert str(path) in str(e)
        return
    assert table.rows, "an empty table is an error"
    for row in table.rows:
        for key, value in row.items():
            col = schema.column_for(str(key))
            assert col is None or _satisfies(col, value), (key, value)
