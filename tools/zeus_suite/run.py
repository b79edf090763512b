"""Run Zeus 0.16's own unit tests against zeus-nb, the package name ``zeus`` mapped to ``zeus_nb``.

    python tools/zeus_suite/run.py            # run, print per-file counts, judge the result
    python tools/zeus_suite/run.py --update   # ... and record it (summary.json, the docs' table)
    python tools/zeus_suite/run.py tests/monitor/test_energy.py   # some files (no judging)

The tests come from Zeus's wheel (``$ZEUS_WHEEL``, else ``pip download zeus==0.16.0`` into
``.cache/zeus-wheel``); nothing of Zeus is installed or kept in this repository. The wheel ships
the tests without some data files: ``data/`` here adds them, and the A40 profiling logs and the
NSDI '23 traces come from ``zeus_nb/resources``. ``shim/sitecustomize.py`` makes ``zeus.x.y`` the
module object ``zeus_nb.x.y``, so Zeus's mocks (``mocker.patch("zeus.device.gpu.nvidia.pynvml")``)
reach zeus-nb.

Judging: every failure or error must be listed in ``known_failures.py`` by its id with the
pattern its one-line failure message must match (a listed test failing otherwise is new), every
listed test must still fail, every test file must be collected, and the listed ones may be at most
1 % of the tests collected. ``tests/test_zeus_suite.py`` runs this and checks the same.

Some of Zeus's tests time threads against sleeps: ``TestIter::test_multiple_endpoints`` pushes two
readings 50 ms apart and asks the iterator for two snapshots, which a thread the OS does not run
for 50 ms (beside four busy processes on 2 cores, 2026-12-05) sees as one, whatever the client.
An unlisted failure is therefore run again, alone, once; one that passes then counts as passed and
is named in the summary (``passed_on_rerun``) with its first failure, never silently. At most
RERUN_AT_MOST are: more than that is no race.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VERSION = "0.16.0"
SUMMARY = HERE / "summary.json"
WHEEL_CACHE = REPO / ".cache" / "zeus-wheel"
#: At most this share of the collected tests may fail (listed in known_failures.py).
MAX_KNOWN_SHARE = 0.01
#: Unlisted failures run again alone (once) when there are at most this many.
RERUN_AT_MOST = 5

sys.path.insert(0, str(HERE))
from known_failures import KNOWN_FAILURES  # noqa: E402


class SuiteError(RuntimeError):
    """The suite could not be run (no wheel, no pytest...): says what to do."""


def find_wheel() -> Path:
    """Zeus's wheel: ``$ZEUS_WHEEL``, one already in the cache, or one pip downloads now."""
    given = os.environ.get("ZEUS_WHEEL")
    if given:
        path = Path(given)
        if not path.is_file():
            raise SuiteError(f"ZEUS_WHEEL={given} is not a file; unset it to download the wheel")
        return path
    cached = sorted(WHEEL_CACHE.glob(f"zeus-{VERSION}-*.whl"))
    if cached:
        return cached[-1]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += [f"zeus=={VERSION}", "-d", str(WHEEL_CACHE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    cached = sorted(WHEEL_CACHE.glob(f"zeus-{VERSION}-*.whl"))
    if done.returncode != 0 or not cached:
        raise SuiteError(
            f"could not download zeus=={VERSION} from PyPI ({done.stderr.strip()[-300:]}); "
            "download it elsewhere and set ZEUS_WHEEL to the file"
        )
    return cached[-1]


def prepare(wheel: Path, workdir: Path) -> Path:
    """Unpack the wheel's tests into ``workdir/tests`` with the data files they read."""
    tests = workdir / "tests"
    shutil.rmtree(tests, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.startswith("tests/")]
        if not members:
            raise SuiteError(f"{wheel.name} holds no tests/ folder; is it Zeus's wheel?")
        zf.extractall(workdir, members)
    shutil.copytree(HERE / "data" / "monitor", tests / "monitor", dirs_exist_ok=True)
    profiles = tests / "profile_data"
    profiles.mkdir(exist_ok=True)
    for csv in (REPO / "zeus_nb" / "resources" / "zeus_profiles").glob("*.csv"):
        shutil.copy(csv, profiles / csv.name)
    # The batch-size simulator's test reads Zeus's NSDI '23 traces from the repository's root.
    traces = workdir / "examples" / "research_reproducibility" / "zeus_nsdi23" / "trace"
    traces.mkdir(parents=True, exist_ok=True)
    for csv in (REPO / "zeus_nb" / "resources" / "zeus_traces").glob("*.csv"):
        shutil.copy(csv, traces / csv.name)
    # Our own pytest configuration, so that the repository's (xdist, timeouts) does not apply.
    (workdir / "pytest.ini").write_text("[pytest]\n")
    return tests


def openei_test_key(tests: Path) -> str:
    """The OpenEI API key Zeus's mocked price tests answer to, read from their own file."""
    source = tests / "monitor" / "test_price.py"
    try:
        found = re.search(r"api_key=(\w+)", source.read_text(encoding="utf-8"))
    except OSError as e:
        raise SuiteError(f"cannot read {source} ({e}); is the wheel Zeus {VERSION}'s?") from e
    if not found:
        raise SuiteError(f"{source} spells out no api_key=...; is the wheel Zeus {VERSION}'s?")
    return found.group(1)


def run(paths: list[str], workdir: Path, timeout: float = 1500) -> dict:
    """Run the tests at ``paths`` (relative to the unpacked tree); the raw per-test report."""
    wheel = find_wheel()
    prepare(wheel, workdir)
    report = workdir / "report.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE / "shim"), str(HERE), str(REPO), env.get("PYTHONPATH")) if p
    )
    env["ZEUS_SUITE_REPORT"] = str(report)
    # Zeus's price tests mock OpenEI answering only URLs with the key their own file spells out;
    # zeus-nb ships no key, so this run (and only it) takes that one from the unpacked tests.
    env["ZEUS_NB_OPENEI_KEY"] = openei_test_key(workdir / "tests")
    env.setdefault("MPLBACKEND", "Agg")
    cmd = [sys.executable, "-m", "pytest", *paths, "-p", "report_plugin", "-p", "no:cacheprovider"]
    # a hang guard per test, not a speed bound: beside busy processes a test takes 5x its idle time
    cmd += ["-n", "0", "--timeout", "600", "-q", "--continue-on-collection-errors"]
    cmd += ["--rootdir", str(workdir), "-c", str(workdir / "pytest.ini")]
    log = workdir / "pytest.log"
    with log.open("w") as out:
        subprocess.run(
            cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
        )
    if not report.is_file():
        raise SuiteError(f"pytest wrote no report; see {log}")
    raw = json.loads(report.read_text())
    raw["wheel"] = wheel.name
    again = [
        nodeid
        for nodeid, e in sorted(raw["tests"].items())
        if e["outcome"] in ("failed", "error") and nodeid not in KNOWN_FAILURES
    ]
    if again and len(again) <= RERUN_AT_MOST:
        report.unlink()
        with (workdir / "pytest-rerun.log").open("w") as out:
            subprocess.run(
                [*cmd[:3], *again, *cmd[3 + len(paths) :]],
                cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
            )  # fmt: skip
        if report.is_file():
            raw = merge_rerun(raw, json.loads(report.read_text()))
    return raw


def merge_rerun(raw: dict, rerun: dict) -> dict:
    """``raw`` with the tests that passed when run again alone counted as passed, and named
    (with their first failure) under ``passed_on_rerun``."""
    tests = dict(raw["tests"])
    passed_again = {}
    for nodeid, entry in rerun["tests"].items():
        first = tests.get(nodeid)
        failed_first = first is not None and first["outcome"] in ("failed", "error")
        if failed_first and entry["outcome"] == "passed":
            passed_again[nodeid] = first["reason"]
            tests[nodeid] = entry
    return {**raw, "tests": tests, "passed_on_rerun": passed_again}


def summarize(raw: dict) -> dict:
    """Per-file counts and the tests that did not pass, in a stable order."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    not_passing = {}
    for nodeid, entry in sorted(raw["tests"].items()):
        files[nodeid.split("::", 1)[0]][entry["outcome"]] += 1
        if entry["outcome"] in ("failed", "error"):
            not_passing[nodeid] = entry
    totals = collections.Counter()
    for counts in files.values():
        totals.update(counts)
    return {
        "wheel": raw["wheel"],
        "collected": sum(totals.values()),
        "totals": {k: totals[k] for k in ("passed", "failed", "error", "skipped")},
        "files": {
            f: {k: c[k] for k in ("passed", "failed", "error", "skipped")}
            for f, c in sorted(files.items())
        },
        "collection_errors": dict(sorted(raw["collection_errors"].items())),
        "not_passing": not_passing,
        "passed_on_rerun": dict(sorted(raw.get("passed_on_rerun", {}).items())),
    }


def problems(summary: dict) -> list[str]:
    """Why this run does not meet the bar (empty when it does)."""
    out = [f"not collected: {f}: {why}" for f, why in summary["collection_errors"].items()]
    failing = summary["not_passing"]
    for nodeid, e in failing.items():
        known = KNOWN_FAILURES.get(nodeid)
        if known is None:
            out.append(
                f"{nodeid}: {e['outcome']}: {e['reason']} "
                "(not in tools/zeus_suite/known_failures.py)"
            )
        elif not re.search(known.failure, e["reason"]):
            out.append(
                f"{nodeid}: {e['outcome']} for another reason than listed: {e['reason']} "
                f"(tools/zeus_suite/known_failures.py expects /{known.failure}/)"
            )
    out += [
        f"{nodeid} passes now: remove it from tools/zeus_suite/known_failures.py"
        for nodeid in KNOWN_FAILURES
        if nodeid not in failing
    ]
    limit = MAX_KNOWN_SHARE * summary["collected"]
    if len(failing) > limit:
        out.append(
            f"{len(failing)} of {summary['collected']} tests fail, more than "
            f"{MAX_KNOWN_SHARE:.0%} ({limit:.1f})"
        )
    return out


def print_summary(summary: dict) -> None:
    for f, c in summary["files"].items():
        counts = f"{c['passed']} passed, {c['failed']} failed, {c['error']} errors"
        print(f"{f}: {counts}, {c['skipped']} skipped")
    for f, why in summary["collection_errors"].items():
        print(f"{f}: NOT COLLECTED: {why}")
    for nodeid, reason in summary.get("passed_on_rerun", {}).items():
        print(f"{nodeid}: failed ({reason}), passed when run again alone")
    t = summary["totals"]
    print(f"zeus test suite: {t['passed']} passed, {t['failed']} failed, {t['error']} errors")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="test files or folders (default: all of tests/)")
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "zeus-suite")
    parser.add_argument("--update", action="store_true", help="record summary.json and the docs")
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for the whole run")
    args = parser.parse_args(argv)
    try:
        summary = summarize(run(args.paths or ["tests"], args.workdir, args.timeout))
    except (SuiteError, subprocess.TimeoutExpired) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_summary(summary)
    if args.paths:
        return 0
    found = problems(summary)
    for line in found:
        print(f"problem: {line}")
    if args.update:
        SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
        sys.path.insert(0, str(HERE.parent))
        import zeus_compat

        print(zeus_compat.write_doc())
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
