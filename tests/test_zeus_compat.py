"""Zeus's public API name by name: imported from zeus_nb, compared, documented from the check."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))

import zeus_api  # noqa: E402
import zeus_compat  # noqa: E402

from zeus_nb.errors import ZeusNbError  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return zeus_compat.check()


def test_every_zeus_name_imports_compatibly_or_is_listed(rows):
    missing = [f"{r.zeus}: {r.detail}" for r in rows if r.status == "missing"]
    assert not missing, "\n".join(missing)


def test_the_record_covers_zeus_public_modules(rows):
    names = {r.zeus for r in rows}
    for expected in (
        "zeus.monitor.energy.ZeusMonitor",
        "zeus.monitor.power.PowerMonitor",
        "zeus.optimizer.power_limit.GlobalPowerLimitOptimizer",
        "zeus.optimizer.batch_size.BatchSizeOptimizer",
        "zeus.device.gpu.get_gpus",
        "zeus.callback.Callback",
        "zeus.metric.EnergyHistogram",
        "zeus._legacy.simulate.Simulator",
    ):
        assert expected in names
    assert len(names) > 300


def test_placeholders_raise_our_one_line_error(rows):
    checked = 0
    for row in rows:
        if row.status != "placeholder":
            continue
        module, name = row.zeus.rsplit(".", 1)
        obj = getattr(importlib.import_module(zeus_compat.ours(module)), name)
        if not callable(obj) or (inspect.isclass(obj) and issubclass(obj, BaseException)):
            continue
        try:  # Zeus's call shape: a placeholder of a class keeps its constructor's parameters
            required = [
                p
                for p in inspect.signature(obj).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            required = []
        with pytest.raises(ZeusNbError) as info:
            obj(*[0] * len(required))
        assert "\n" not in str(info.value) and len(str(info.value)) > 20, row.zeus
        checked += 1
    assert checked > 0


def test_docs_table_is_what_the_check_finds(rows):
    assert zeus_compat.DOC.read_text() == zeus_compat.rendered_doc(rows), (
        "docs/zeus_compat.md is out of date: run `python tools/zeus_api.py doc`"
    )


def test_signature_comparison_catches_what_breaks_a_call():
    source = 'def zeus(a, b=1, *, c="x"): ...'
    params = zeus_api._params(zeus_api.ast.parse(source).body[0].args)

    def same(a, b=1, *, c="x", extra=None): ...

    def moved(b=1, a=None, *, c="x"): ...

    def other_default(a, b=2, *, c="x"): ...

    def needs_more(a, b=1, *, c="x", d): ...

    def keyword_to_positional(a, b=1, c="x"): ...

    assert zeus_compat.compare_params(params, inspect.signature(same)) == []
    assert zeus_compat.compare_params(params, inspect.signature(keyword_to_positional)) == []
    assert zeus_compat.compare_params(params, inspect.signature(moved))
    assert zeus_compat.compare_params(params, inspect.signature(other_default)) == [
        "b defaults to 2 (Zeus: 1)"
    ]
    assert zeus_compat.compare_params(params, inspect.signature(needs_more)) == [
        "extra required parameter d"
    ]


@pytest.mark.skipif(not os.environ.get("ZEUS_WHEEL"), reason="set ZEUS_WHEEL to Zeus's wheel")
def test_record_is_the_wheels_api(tmp_path):
    """The committed record is what tools/zeus_api.py reads from the wheel today."""
    wheel = Path(os.environ["ZEUS_WHEEL"])
    recorded = zeus_api.json.loads(zeus_compat.RECORD.read_text())
    assert recorded["wheel"] == wheel.name
    assert recorded["modules"] == zeus_api.json.loads(zeus_api.json.dumps(zeus_api.record(wheel)))
    subprocess.run([sys.executable, "-c", "import zeus_nb"], check=True)
