"""zeus-nb course build | verify | grade | timings | slides"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from zeus_nb.course import CourseError, build, grade, timings, timings_table, verify
from zeus_nb.course import grade_report as report
from zeus_nb.course.slides import build_slides
from zeus_nb.inputs.args import count, nonempty, seconds
from zeus_nb.inputs.validate import writable_dir
from zeus_nb.runner.notebooks import merge_parameters, parse_value
from zeus_nb.utils.environ import temp_environ
from zeus_nb.utils.files import atomic_write

PATH = nonempty("path")


def register(sub) -> None:
    p = sub.add_parser("course", help="student and solution notebooks for teaching, run times")
    course_sub = p.add_subparsers(dest="course_command", required=True, metavar="ACTION")

    b = course_sub.add_parser(
        "build", help="write DIR/student and DIR/solution versions of the notebooks"
    )
    b.add_argument(
        "notebooks",
        nargs="*",
        type=PATH,
        help="notebooks or folders (default: the shipped notebooks)",
    )
    b.add_argument(
        "-o", "--output", type=PATH, default="course", help="course folder (default: course)"
    )
    b.set_defaults(func=run_build)

    v = course_sub.add_parser(
        "verify",
        help="execute a built course: both editions run to the end, solutions pass every check",
    )
    v.add_argument(
        "dir", nargs="?", type=PATH, default="course", help="course folder (default: course)"
    )
    v.add_argument(
        "-o", "--output", type=PATH, default=None, help="executed notebooks (default: DIR/executed)"
    )
    _execution_options(v)
    v.add_argument(
        "-j", "--jobs", type=count(1, 64), default=2, help="notebooks executed at once (default: 2)"
    )
    v.set_defaults(func=run_verify)

    g = course_sub.add_parser("grade", help="execute students' notebooks and report every exercise")
    g.add_argument(
        "submissions", nargs="+", type=PATH, help="submitted notebooks or folders of them"
    )
    g.add_argument(
        "-o",
        "--output",
        type=PATH,
        default="graded",
        help="executed copies and grades.csv (default: graded)",
    )
    _execution_options(g)
    g.add_argument(
        "--timeout",
        type=seconds,
        default=600.0,
        help="seconds a cell may run before the rest of a submission counts as not run, in the "
        "kernel's own time: waits for a CPU on a busy machine do not count (default: 600)",
    )
    g.add_argument(
        "-j",
        "--jobs",
        type=count(1, 64),
        default=2,
        help="submissions executed at once (default: 2)",
    )
    g.set_defaults(func=run_grade)

    t = course_sub.add_parser("timings", help="markdown table of papermill run times")
    t.add_argument(
        "paths",
        nargs="*",
        type=PATH,
        default=["."],
        help="executed notebooks or folders (default: .)",
    )
    t.add_argument(
        "-o", "--output", type=PATH, default=None, help="also write the table to this file"
    )
    t.set_defaults(func=run_timings)

    s = course_sub.add_parser(
        "slides",
        help="reveal.js slides of the executed notebooks, plots included (exercises unsolved)",
        description=(
            "Execute the notebooks (or take executed copies from --executed) and write one "
            "reveal.js deck per notebook, every slide cut to fit, exercises shown as students get "
            "them. reveal.js and require.js are copied beside the decks (fetched once with "
            "`npm pack` into ~/.cache/zeus-nb/npm), so the decks open offline."
        ),
    )
    s.add_argument(
        "notebooks",
        nargs="*",
        type=PATH,
        help="notebooks or folders (default: the shipped notebooks)",
    )
    s.add_argument(
        "-o", "--output", type=PATH, default="slides", help="output folder (default: slides)"
    )
    s.add_argument(
        "--executed",
        type=PATH,
        default=None,
        metavar="DIR",
        help="use the executed notebooks in DIR (e.g. `zeus-nb tour -o DIR`) instead of running",
    )
    _execution_options(s)
    s.add_argument(
        "--reveal-url",
        type=nonempty("URL"),
        default=None,
        help="load reveal.js from this address instead of the copy beside the decks",
    )
    s.set_defaults(func=run_slides)


def _execution_options(p) -> None:
    p.add_argument("--smoke", action="store_true", help="pass smoke=True: a short run")
    p.add_argument(
        "--backend",
        choices=["auto", "sim", "nvml"],
        default=None,
        help="pass backend=... and set ZEUS_NB_BACKEND for the kernels",
    )
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        type=nonempty("text"),
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="papermill parameter (a Python literal, else a string; '\"\"' for an empty "
        "string); repeatable",
    )
    p.add_argument(
        "--kernel", type=nonempty("name"), default="python3", help="Jupyter kernel (python3)"
    )


def _parameters_and_env(args) -> tuple[dict, dict[str, str]]:
    # a Python literal, else text; true/false/yes/no are booleans (never the truthy text "no")
    params = {name: parse_value(value, None, name) for name, value in args.parameter}
    env = {}
    options: dict = {"--smoke": True} if args.smoke else {}
    if args.backend:
        options["--backend"] = args.backend
        env["ZEUS_NB_BACKEND"] = args.backend
    return merge_parameters(params, options), env


def run_build(args) -> int:
    writable_dir(args.output, "-o")
    built = build(args.notebooks or None, args.output)
    out = Path(args.output)
    for nb in built:
        print(f"{nb.name}: {nb.exercises} exercise(s)")
    total = sum(nb.exercises for nb in built)
    print(
        f"wrote {len(built)} notebooks with {total} exercises to {out / 'student'} "
        f"and {out / 'solution'}"
    )
    return 0


def run_verify(args) -> int:
    params, env = _parameters_and_env(args)
    if Path(args.dir).is_dir():  # else verify() says the course folder is missing
        writable_dir(args.output or Path(args.dir) / "executed", "-o")
    results = verify(args.dir, args.output, params, env, args.kernel, args.jobs)
    for r in results:
        print(f"{'PASS' if r.ok else 'FAIL'} {r.version:8} {r.notebook}: {r.detail}")
    out = Path(args.output) if args.output else Path(args.dir) / "executed"
    solution_dir = out / "solution"
    problems: list[str] = []  # a notebook without a run time is named, not fatal
    table = timings_table(timings([solution_dir], problems))
    atomic_write(out / "timings.md", table)
    print(f"\nRun times of the solutions ({out / 'timings.md'}):\n\n{table}")
    for problem in problems:
        print(f"zeus-nb: not timed: {problem}", file=sys.stderr)
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} executions failed")
        return 1
    return 0


def run_grade(args) -> int:
    params, env = _parameters_and_env(args)
    missing = [s for s in args.submissions if not Path(s).exists()]
    if missing:  # checked before the output folder is made
        raise CourseError(f"{', '.join(missing)}: no such notebook or folder")
    writable_dir(args.output, "-o")
    out = Path(args.output)
    report.read_ledger(out / report.LEDGER)  # a damaged one is refused before hours of grading
    print(f"grading, {args.jobs} submission(s) at a time; each line comes as one finishes:")

    def progress(done: int, total: int, rows: list, seconds: float) -> None:
        passed = sum(r.status == "passed" for r in rows)
        graded = sum(r.exercise > 0 for r in rows)
        print(
            f"[{done}/{total}] {rows[0].submission}: {passed}/{graded} passed ({seconds:.0f} s)",
            flush=True,
        )

    results = grade(
        args.submissions,
        args.output,
        params,
        env,
        args.kernel,
        args.timeout,
        args.jobs,
        progress=progress,
    )
    batch = results
    results = report.record(out, batch)
    student_totals = report.totals(results)
    by_submission: dict[str, list] = {}
    for r in batch:  # this run's submissions; the totals count every grade in the folder
        by_submission.setdefault(r.submission, []).append(r)
    print()
    for rows in by_submission.values():
        print("\n".join(report.submission_lines(rows)))
    legend = report.legend_lines(batch)
    if legend:
        print("\n" + "\n".join(legend))
    print("\nper student:\n" + "\n".join(report.totals_lines(student_totals)))
    earlier = len({r.copy or r.submission for r in results}) - len(by_submission)
    kept = f" (with {earlier} notebook(s) graded before)" if earlier > 0 else ""
    print(
        f"\ngrades written to {out / 'grades.csv'}{kept}, per-student totals to "
        f"{out / 'totals.csv'}"
    )
    return 0


def run_timings(args) -> int:
    if args.output and Path(args.output).is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", args.output)
    problems: list[str] = []  # each unreadable notebook is named; the others still timed
    rows = timings(args.paths, problems)
    if not rows and problems:
        raise CourseError("; ".join(problems))
    table = timings_table(rows)
    print(table, end="")
    if args.output:
        atomic_write(args.output, table)
    for problem in problems:
        print(f"zeus-nb: skipped: {problem}", file=sys.stderr)
    return 1 if problems else 0


def run_slides(args) -> int:
    params, env = _parameters_and_env(args)
    writable_dir(args.output, "-o")
    with temp_environ(**env):
        paths = build_slides(
            args.notebooks or None,
            args.output,
            args.reveal_url,
            args.executed,
            params,
            report=lambda line: print(line, flush=True),
        )
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0
