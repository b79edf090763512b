"""pytest plugin: the outcome of every Zeus test, as JSON, for ``tools/zeus_suite/run.py``.

Loaded with ``-p report_plugin`` (this folder is on ``PYTHONPATH`` during the run). It writes the
file named by ``ZEUS_SUITE_REPORT`` at the end of the session: one entry per test id (passed,
failed, error, skipped, with the one-line reason of a failure) and one per test file that could
not be collected.
"""

from __future__ import annotations

import json
import os

import pytest

_outcomes: dict[str, dict[str, str]] = {}
_collection_errors: dict[str, str] = {}


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    # A collection error's text is a traceback: its last "E   ..." line names the cause.
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors[-1] if errors else lines[0] if lines else "")[:300]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _collection_errors[report.nodeid or "?"] = _reason(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _outcomes.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
    if report.failed:
        # A failing fixture (setup) or teardown is an error, as pytest itself counts it.
        outcome = "failed" if report.when == "call" else "error"
        if entry["outcome"] not in ("failed", "error"):
            entry.update(outcome=outcome, reason=_reason(report))
    elif report.skipped and report.when in ("setup", "call") and entry["outcome"] == "passed":
        entry.update(outcome="skipped", reason=_reason(report))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("ZEUS_SUITE_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"tests": _outcomes, "collection_errors": _collection_errors}, f, indent=0)
