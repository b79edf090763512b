"""Course kit: marker splitting, building student/solution notebooks, executing them, run times."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from zeus_nb import course
from zeus_nb.cli import main
from zeus_nb.course import BEGIN, END, STUB, CourseError
from zeus_nb.errors import ZeusNbError

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "course_fixture" / "exercises.ipynb"
REAL_NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SMOKE = {"smoke": True, "backend": "sim"}
SIM_ENV = {"ZEUS_NB_BACKEND": "sim"}
# The checks each shipped notebook's exercises call, by notebook number.
EXPECTED_CHECKS = {
    "01": ["average_power", "energy_per_step"],
    "02": ["zeus_cost", "energy_optimal_limit"],
    "03": ["pareto_front", "least_cost_config"],
    "04": ["should_stop_early", "thompson_pick"],
    "05": ["aggregate_data_parallel", "slowdown_limit"],
    "06": ["iteration_energy", "plan_within"],
}


def _source(cell) -> str:
    return "".join(cell.source) if isinstance(cell.source, list) else cell.source


def _write_nb(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Py"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# --- splitting one cell ---------------------------------------------------------------------


def test_split_keeps_indentation_and_drops_markers():
    src = (
        "def f(x):\n"
        "    y = 1\n"
        f"    {BEGIN}\n"
        "    z = x + y\n"
        "    return z\n"
        f"    {END}\n"
        "\n"
        "check.thing(f)"
    )
    student, solution, blocks = course.split_source(src)
    assert blocks == 1
    assert student == f"def f(x):\n    y = 1\n    {STUB}\n\ncheck.thing(f)"
    assert solution == "def f(x):\n    y = 1\n    z = x + y\n    return z\n\ncheck.thing(f)"
    assert "NotImplementedError" in STUB


def test_split_handles_several_blocks_at_different_depths():
    src = (
        f"{BEGIN}\na = 1\n{END}\nif True:\n        {BEGIN}\n        b = 2\n        {END}\nprint(a)"
    )
    student, solution, blocks = course.split_source(src)
    assert blocks == 2
    assert student.splitlines() == [STUB, "if True:", f"        {STUB}", "print(a)"]
    assert solution.splitlines() == ["a = 1", "if True:", "        b = 2", "print(a)"]


def test_a_cell_without_markers_is_unchanged():
    src = "x = 1\n# a comment about the solution\nprint(x)"
    assert course.split_source(src) == (src, src, 0)


@pytest.mark.parametrize(
    "src, message",
    [
        (f"{BEGIN}\nx = 1\n", "never closed"),
        (f"x = 1\n{END}\n", "without a"),
        (f"{BEGIN}\n{BEGIN}\nx = 1\n{END}\n{END}\n", "inside the block opened on line 1"),
        (f"def f():\n    {BEGIN}\n    return 1\n{END}\n", "same indentation"),
        ("# begin solution\nx = 1\n# END SOLUTION\n", "exactly"),
    ],
)
def test_bad_markers_are_reported_with_their_place(src, message):
    with pytest.raises(CourseError, match=message) as info:
        course.split_source(src, "nb.ipynb, cell 4")
    assert "nb.ipynb, cell 4, line" in str(info.value)


# --- building a course ----------------------------------------------------------------------


def test_build_writes_stripped_student_and_solution_versions(tmp_path):
    nb = nbformat.read(FIXTURE, as_version=4)
    # Pretend an instructor ran it: outputs and papermill records must not reach the students.
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = 7
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="secret\n")]
            cell.metadata["papermill"] = {"duration": 1.0}
    nb.metadata["papermill"] = {"duration": 3.0}
    src = tmp_path / "in" / FIXTURE.name
    src.parent.mkdir()
    nbformat.write(nb, src)

    built = course.build([src], tmp_path / "course")
    assert [(b.name, b.exercises) for b in built] == [(FIXTURE.name, 2)]
    student = nbformat.read(tmp_path / "course" / "student" / FIXTURE.name, as_version=4)
    solution = nbformat.read(tmp_path / "course" / "solution" / FIXTURE.name, as_version=4)
    for version in (student, solution):
        assert "papermill" not in version.metadata
        assert len(version.cells) == len(nb.cells)
        for cell in version.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
                assert "papermill" not in cell.metadata

    student_text = "\n".join(_source(c) for c in student.cells)
    solution_text = "\n".join(_source(c) for c in solution.cells)
    assert student_text.count(STUB) == 2
    assert "measurement.total_energy / measurement.time" not in student_text
    assert "measurement.total_energy / measurement.time" in solution_text
    for text in (student_text, solution_text):
        assert BEGIN not in text and END not in text
        assert "check.average_power(average_power)" in text and "check.zeus_cost(zeus_cost)" in text
    # Cells without exercises are the same in both versions; the parameters tag is kept.
    assert [_source(c) for c in student.cells[:4]] == [_source(c) for c in solution.cells[:4]]
    assert "parameters" in student.cells[1].metadata["tags"]
    for version in (student, solution):
        tagged = [
            i for i, c in enumerate(version.cells) if "exercise" in c.metadata.get("tags", [])
        ]
        assert tagged == [i for i, c in enumerate(student.cells) if STUB in _source(c)]
        assert len(tagged) == 2
    # The source notebook is untouched.
    assert nbformat.read(src, as_version=4).cells[2].outputs


def test_build_error_names_notebook_and_cell_and_writes_nothing(tmp_path):
    good = _write_nb(tmp_path / "in" / "a_good.ipynb", f"{BEGIN}\nx = 1\n{END}")
    bad = _write_nb(tmp_path / "in" / "b_bad.ipynb", "x = 0", f"y = 1\n{BEGIN}\ny = 2\n")
    with pytest.raises(CourseError, match=r"b_bad\.ipynb, cell 1, line 2.*never closed"):
        course.build([good, bad], tmp_path / "course")
    assert not (tmp_path / "course").exists()


def test_build_rejects_markers_that_break_the_python(tmp_path):
    nb = _write_nb(tmp_path / "x.ipynb", f"if True:\n{BEGIN}\n    x = 1\n{END}\n")
    with pytest.raises(CourseError, match=r"x\.ipynb, cell 0: the student version is not valid"):
        course.build([nb], tmp_path / "course")


def test_build_takes_folders_and_rejects_missing_paths(tmp_path):
    _write_nb(tmp_path / "in" / "one.ipynb", "x = 1")
    _write_nb(tmp_path / "in" / "two.ipynb", f"{BEGIN}\nx = 1\n{END}")
    built = course.build([tmp_path / "in"], tmp_path / "c")
    assert [(b.name, b.exercises) for b in built] == [("one.ipynb", 0), ("two.ipynb", 1)]
    with pytest.raises(CourseError, match="no such notebook"):
        course.build([tmp_path / "missing.ipynb"], tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CourseError, match="no notebooks"):
        course.build([tmp_path / "empty"], tmp_path / "c")


def test_build_defaults_to_the_shipped_notebooks(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    _write_nb(shipped / "01_first.ipynb", f"{BEGIN}\nx = 1\n{END}")
    _write_nb(shipped / "scratch.ipynb", "y = 2")  # not a numbered course notebook
    monkeypatch.setenv("ZEUS_NB_NOTEBOOKS", str(shipped))
    monkeypatch.chdir(tmp_path)  # independent of the working directory
    assert main(["course", "build", "-o", "out"]) == 0
    assert sorted(p.name for p in (tmp_path / "out" / "student").iterdir()) == ["01_first.ipynb"]
    monkeypatch.setenv("ZEUS_NB_NOTEBOOKS", str(tmp_path / "nope"))
    with pytest.raises(ZeusNbError, match="ZEUS_NB_NOTEBOOKS"):
        course.build(None, tmp_path / "out2")


def test_cli_build_and_its_errors(tmp_path, capsys):
    assert main(["course", "build", str(FIXTURE), "-o", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "exercises.ipynb: 2 exercise(s)" in out
    assert (tmp_path / "c" / "student" / FIXTURE.name).is_file()
    assert (tmp_path / "c" / "solution" / FIXTURE.name).is_file()

    bad = _write_nb(tmp_path / "bad.ipynb", f"{END}")
    assert main(["course", "build", str(bad), "-o", str(tmp_path / "c2")]) == 2
    err = capsys.readouterr().err
    assert "bad.ipynb, cell 0, line 1" in err and "Traceback" not in err


# --- run-time tables ------------------------------------------------------------------------


def _executed(path: Path, duration: float | None, exception: bool = False, **params) -> Path:
    nb = nbformat.v4.new_notebook()
    if duration is not None:
        nb.metadata["papermill"] = {
            "duration": duration,
            "exception": exception,
            "parameters": params,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_timings_table_from_papermill_records(tmp_path, capsys):
    _executed(tmp_path / "runs" / "01.ipynb", 12.34, smoke=True)
    _executed(tmp_path / "runs" / "deep" / "02.ipynb", 125.0, exception=True, batch_size=64)
    rows = course.timings([tmp_path / "runs"])
    assert [(r.notebook, r.seconds, r.status) for r in rows] == [
        ("01.ipynb", 12.34, "ok"),
        ("deep/02.ipynb", 125.0, "failed"),
    ]
    table = course.timings_table(rows)
    lines = table.splitlines()
    assert lines[0].startswith("| notebook |")
    assert lines[2] == "| 01.ipynb | smoke=True | ok | 12.3 s |"
    assert lines[3] == "| deep/02.ipynb | batch_size=64 | failed | 2 min 05 s |"
    assert lines[4] == "| **total** | | | **2 min 17 s** |"

    out_file = tmp_path / "t.md"
    assert main(["course", "timings", str(tmp_path / "runs"), "-o", str(out_file)]) == 0
    assert capsys.readouterr().out == table == out_file.read_text()


def test_timings_reject_notebooks_papermill_did_not_run(tmp_path, capsys):
    _executed(tmp_path / "a.ipynb", 1.0)
    _executed(tmp_path / "b.ipynb", None)
    with pytest.raises(CourseError, match=r"b\.ipynb.*execute these notebooks with papermill"):
        course.timings([tmp_path])
    assert main(["course", "timings", str(tmp_path / "missing")]) == 2
    assert "no such notebook" in capsys.readouterr().err


# --- executing built notebooks --------------------------------------------------------------


def _shown(nb) -> str:
    """Everything an executed notebook printed or displayed, as text."""
    from zeus_nb.course.feedback import cell_text

    return "\n".join(cell_text(c) for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_fixture_course_executes_as_intended(form, tmp_path, monkeypatch, capsys):
    """`course verify` as the README writes it: both editions run to the end.

    The solution passes every check; the student edition says "not done yet" per exercise and
    goes on with the reference answers. Relative and absolute paths give the same result.
    """
    monkeypatch.chdir(tmp_path)
    course_dir = "course" if form == "relative" else str(tmp_path / "course")
    assert main(["course", "build", str(FIXTURE), "-o", course_dir]) == 0
    code = main(["course", "verify", course_dir, "--smoke", "--backend", "sim"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "PASS solution exercises.ipynb: ran to the end, every exercise passed" in out
    assert "PASS student  exercises.ipynb: ran to the end, every exercise says not done" in out
    assert sorted(p.name for p in (tmp_path / "course").iterdir()) == [
        "executed",
        "solution",
        "student",
    ]  # no stray course/solution/course/... folder

    executed = tmp_path / "course" / "executed"
    solution = nbformat.read(executed / "solution" / FIXTURE.name, as_version=4)
    shown = _shown(solution)
    assert "✓ average_power" in shown and "✓ zeus_cost" in shown
    assert re.search(r"\d+\.\d W over 3 steps", shown)  # smoke parameter used
    student = nbformat.read(executed / "student" / FIXTURE.name, as_version=4)
    assert not student.metadata.papermill.get("exception")
    assert not [o for c in student.cells for o in c.get("outputs", []) if o.output_type == "error"]
    shown = _shown(student)
    assert shown.count("not done yet") == 2 and "Traceback" not in shown
    assert re.search(r"\d+\.\d W over 3 steps", shown)  # went on with the reference

    duration = solution.metadata.papermill.duration
    assert duration > 0
    table = (executed / "timings.md").read_text()
    assert f"| exercises.ipynb | backend='sim', smoke=True | ok | {duration:.1f} s |" in table


@pytest.mark.slow
def test_verify_catches_broken_courses(tmp_path):
    """A wrong solution fails loudly; a student edition runs to the end, each stub "not done"."""
    wrong = _write_nb(
        tmp_path / "in" / "wrong.ipynb",
        "from zeus_nb.course import check",
        f"def zeus_cost(e, t, eta, p):\n    {BEGIN}\n    return e\n    {END}\n\n"
        "zeus_cost = check.zeus_cost(zeus_cost)",
    )
    uncalled = _write_nb(
        tmp_path / "in" / "uncalled.ipynb", f"def f():\n    {BEGIN}\n    return 1\n    {END}"
    )
    early = _write_nb(
        tmp_path / "in" / "early.ipynb",
        "raise NotImplementedError('not an exercise')",
        f"def f():\n    {BEGIN}\n    return 1\n    {END}",
    )
    c = tmp_path / "c"
    course.build([wrong, uncalled, early], c)
    run = tmp_path / "run"
    wrong_solution = course.execute_version(
        c / "solution/wrong.ipynb", "solution", run / "1.ipynb", env=SIM_ENV
    )
    uncalled_student = course.execute_version(
        c / "student/uncalled.ipynb", "student", run / "2.ipynb", env=SIM_ENV
    )
    early_student = course.execute_version(
        c / "student/early.ipynb", "student", run / "3.ipynb", env=SIM_ENV
    )
    assert not wrong_solution.ok and "CheckError" in wrong_solution.detail
    assert "of 4 cases right" in wrong_solution.detail
    assert not uncalled_student.ok and "no check result" in uncalled_student.detail
    assert not early_student.ok and "NotImplementedError: not an exercise" in early_student.detail


@pytest.mark.slow
@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_grade_reports_every_exercise(form, tmp_path, monkeypatch, capsys):
    """`course grade` as the README writes it, with relative or absolute paths."""
    course.build([FIXTURE], tmp_path / "c")
    subs = tmp_path / "submissions"
    solution_nb = tmp_path / "c/solution" / FIXTURE.name

    def submit(who: str, *edits: tuple[int, str, str]) -> None:
        nb = nbformat.read(solution_nb, as_version=4)
        ex = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
        for index, old, new in edits:
            assert old in _source(ex[index])
            ex[index].source = _source(ex[index]).replace(old, new)
        (subs / who).mkdir(parents=True)
        nbformat.write(nb, subs / who / FIXTURE.name)

    # alice hands in the untouched student copy, bob the solution
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / FIXTURE.name).write_bytes(
        (tmp_path / "c/student" / FIXTURE.name).read_bytes()
    )
    submit("bob")
    # carol answers exercise 1 with a constant and deletes the check call of exercise 2
    energy = "measurement.total_energy / measurement.time"
    submit("carol", (0, energy, "38.2"), (1, "zeus_cost = check.zeus_cost(zeus_cost)", ""))
    _write_nb(subs / "dave" / "untagged.ipynb", "x = 1")
    # erin's first exercise never finishes
    submit("erin", (0, "if measurement.time == 0:", "while True:\n        pass\n    if True:"))
    # frank's second exercise cell raises before its check
    submit("frank", (1, "zeus_cost = check", "undefined_name\nzeus_cost = check"))
    # gina's first exercise passes but rebinds a name the next cell needs, which then fails
    submit("gina", (0, "average_power = check", "steps = 'three'\naverage_power = check"))

    monkeypatch.chdir(tmp_path)
    where = (lambda p: str(p)) if form == "absolute" else (lambda p: str(p.relative_to(tmp_path)))
    graded = tmp_path / "graded"
    code = main(
        [
            "course",
            "grade",
            where(subs) + "/",
            "-o",
            where(graded),
            "--smoke",
            "--backend",
            "sim",
            "--timeout",
            "4",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    rows = list(csv.DictReader((graded / "grades.csv").open()))
    got = {(Path(r["submission"]).parent.name, r["exercise"]): r for r in rows}
    assert len(rows) == 13
    assert got["alice", "1"]["status"] == got["alice", "2"]["status"] == "not attempted"
    assert got["bob", "1"]["status"] == got["bob", "2"]["status"] == "passed"
    assert got["carol", "1"]["status"] == "failed"
    detail = got["carol", "1"]["detail"]
    assert re.search(r"\d of 4 cases right", detail) and "expected" not in detail
    assert (
        got["carol", "2"]["status"] == "failed" and "no check result" in got["carol", "2"]["detail"]
    )
    assert got["dave", "0"]["status"] == "failed" and "tagged" in got["dave", "0"]["detail"]
    assert got["erin", "1"]["status"] == "failed" and "timed out" in got["erin", "1"]["detail"]
    assert got["erin", "2"]["status"] == "failed" and "timed out" in got["erin", "2"]["detail"]
    assert got["frank", "1"]["status"] == "passed"
    assert got["frank", "2"]["status"] == "error"
    assert "NameError" in got["frank", "2"]["detail"] and "cell" in got["frank", "2"]["detail"]
    # the later error gina's exercise caused is reported on that exercise, for the teacher
    assert got["gina", "1"]["status"] == "error", got["gina", "1"]
    gina = got["gina", "1"]["detail"]
    assert "its check passed" in gina and "TypeError" in gina and "steps from this" in gina
    # exercises are named by their titles; the student's "goes on" sentence is not the teacher's
    assert got["carol", "1"]["title"] == "average power"
    assert got["bob", "2"]["title"] == "the Zeus cost"
    assert "The notebook goes on" not in detail and "later cells ran with the reference" in detail
    bob = str(Path(where(subs)) / "bob" / FIXTURE.name)
    assert f"{bob}: 2/2 passed" in out
    assert len(list(graded.glob("*.ipynb"))) == 6
    # a line as each submission finishes, before the summary
    progress = re.findall(r"^\[(\d)/7\] (.+): (\d)/(\d) passed \(\d+ s\)$", out, re.M)
    assert sorted(int(p[0]) for p in progress) == [1, 2, 3, 4, 5, 6, 7]
    assert out.index("[7/7]") < out.index(f"\n{bob}: 2/2 passed\n")
    # one sentence per outcome kind: alice's two unattempted exercises share one legend line
    assert "  not attempted: exercise 1 (average power), 2 (the Zeus cost)" in out
    assert out.count("'your turn' line") == 1
    assert got["alice", "1"]["student"] == "alice" and got["alice", "1"]["detail"] == ""
    # per-student totals, printed and written
    totals = {r["student"]: r for r in csv.DictReader((graded / "totals.csv").open())}
    assert sorted(totals) == ["alice", "bob", "carol", "dave", "erin", "frank", "gina"]
    assert (totals["bob"]["passed"], totals["bob"]["exercises"]) == ("2", "2")
    assert (totals["alice"]["passed"], totals["alice"]["not attempted"]) == ("0", "2")
    assert (totals["frank"]["passed"], totals["frank"]["error"]) == ("1", "1")
    table = out.split("per student:", 1)[1]
    assert re.search(r"^bob\s+1\s+2/2\s", table, re.M)
    assert re.search(r"^alice\s+1\s+0/2\s", table, re.M)


@pytest.mark.parametrize("solutions", [False, True], ids=["student", "instructor"])
def test_build_from_an_edition_says_which_and_refuses(solutions, tmp_path, capsys):
    """The Docker image's notebooks are an edition: no markers left, so no course to build."""
    course.write_edition(tmp_path / "nbs", solutions, [FIXTURE])
    code = main(["course", "build", str(tmp_path / "nbs"), "-o", str(tmp_path / "c")])
    err = capsys.readouterr().err
    kind = "instructor" if solutions else "student"
    assert code == 2 and f"{FIXTURE.name} is the {kind} edition" in err
    assert "course-source" in err and "notebooks/" in err
    assert not list((tmp_path / "c").rglob("*.ipynb"))


@pytest.mark.slow
def test_grading_adds_students_and_rewrites_one(tmp_path, monkeypatch, capsys):
    """Two batches into one folder keep every grade; grading a student again replaces theirs."""
    course.build([FIXTURE], tmp_path / "c")
    student = (tmp_path / "c/student" / FIXTURE.name).read_bytes()
    solution = (tmp_path / "c/solution" / FIXTURE.name).read_bytes()
    for batch, who, text in [("one", "alice", student), ("one", "bob", solution)]:
        (tmp_path / batch / who).mkdir(parents=True)
        (tmp_path / batch / who / FIXTURE.name).write_bytes(text)
    (tmp_path / "two/carol").mkdir(parents=True)
    (tmp_path / "two/carol" / FIXTURE.name).write_bytes(student)
    (tmp_path / "again/alice").mkdir(parents=True)
    (tmp_path / "again/alice" / FIXTURE.name).write_bytes(solution)
    monkeypatch.chdir(tmp_path)

    def grade(batch: str) -> dict[tuple[str, str], str]:
        argv = ["course", "grade", batch, "-o", "graded", "--smoke", "--backend", "sim"]
        assert main(argv) == 0
        rows = list(csv.DictReader(Path("graded/grades.csv").read_text().splitlines()))
        return {(r["student"], r["exercise"]): r["status"] for r in rows}

    grade("one")
    both = grade("two")
    assert both == {
        ("alice", "1"): "not attempted",
        ("alice", "2"): "not attempted",
        ("bob", "1"): "passed",
        ("bob", "2"): "passed",
        ("carol", "1"): "not attempted",
        ("carol", "2"): "not attempted",
    }
    assert "graded before" in capsys.readouterr().out
    again = grade("again")
    assert again == {**both, ("alice", "1"): "passed", ("alice", "2"): "passed"}
    totals = {
        r["student"]: r for r in csv.DictReader(Path("graded/totals.csv").read_text().splitlines())
    }
    assert sorted(totals) == ["alice", "bob", "carol"] and totals["alice"]["passed"] == "2"


def test_a_damaged_grade_ledger_is_refused_before_grading(tmp_path, capsys):
    (tmp_path / "graded").mkdir()
    (tmp_path / "graded/grades.json").write_text('[{"submission": 1}]')
    _write_nb(tmp_path / "subs/a.ipynb", "x = 1")
    assert main(["course", "grade", str(tmp_path / "subs"), "-o", str(tmp_path / "graded")]) == 2
    err = capsys.readouterr().err
    assert "grades.json" in err and "start the grades over" in err
    assert not (tmp_path / "graded/grades.csv").exists()


# --- the shipped notebooks ------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_course(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    return {b.name: b for b in course.build(REAL_NOTEBOOKS, out)}


def _printed(nb) -> list[str]:
    """Every line an executed notebook printed."""
    return [
        line
        for cell in nb.cells
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream"
        for line in o.get("text", "").splitlines()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", REAL_NOTEBOOKS, ids=lambda p: p.stem)
def test_shipped_notebook_student_edition_runs(notebook, real_course, student_editions):
    """The student edition runs to the end in smoke mode, each stub saying "not done yet".

    Judged on the session's one run of the student editions (tests/tour_fixture.py), which the
    site test shows as well; the instructor edition is judged on the session's tour
    (test_notebooks.py), which runs the same program: the shipped notebook with its markers.
    """
    from zeus_nb.course.verify import judge_executed

    b = real_course[notebook.name]
    assert b.exercises >= 1, f"{notebook.name} has no exercise markers"
    student = nbformat.read(b.student, as_version=4)
    student_text = json.dumps([_source(c) for c in student.cells])
    for name in EXPECTED_CHECKS.get(notebook.name[:2], []):
        assert f"check.{name}(" in student_text, f"{notebook.name} should call check.{name}"

    folder, out = student_editions
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    executed = folder / b.name
    ran = nbformat.read(executed, as_version=4)
    code = [c.source for c in ran.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert code == [c.source for c in student.cells], "the session ran another edition"
    run = judge_executed(executed, "student", b.name)
    assert run.ok, f"{notebook.name} student: {run.detail}"
    images = [
        o for c in ran.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert images, f"{notebook.name}: the site would show no figure"
    # "your" is said only of the student's own code: never while the reference runs
    printed = _printed(ran)
    yours = [ln for ln in printed if re.search(r"\byours?\b", ln, re.I)]
    assert not yours, f"{notebook.name} student edition: {yours}"
    if "check.whose(" in _source_text(notebook):
        assert any("the reference " in ln for ln in printed), notebook.name


def _source_text(notebook: Path) -> str:
    return "\n".join(_source(c) for c in nbformat.read(notebook, as_version=4).cells)


@pytest.mark.parametrize("notebook", REAL_NOTEBOOKS, ids=lambda p: p.stem)
def test_student_edition_holds_no_solution(notebook, tmp_path):
    """What a student opens has a "your turn" line per exercise and none of the solution code."""
    source = nbformat.read(notebook, as_version=4)
    solution_lines = set()
    for cell in source.cells:
        inside = False
        for line in _source(cell).splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and len(line.strip()) > 8 and not line.strip().startswith("#"):
                solution_lines.add(line.strip())
    assert solution_lines, f"{notebook.name} has no exercise"
    student = course.edition_text(notebook)
    text = "\n".join(_source(c) for c in nbformat.reads(student, as_version=4).cells)
    leaked = sorted(line for line in solution_lines if line in text)
    assert not leaked, f"{notebook.name} student edition shows solution lines: {leaked}"
    assert text.count(STUB) >= 1 and BEGIN not in text
    assert nbformat.reads(student, as_version=4).metadata.zeus_nb == {"edition": "student"}
    instructor = nbformat.reads(course.edition_text(notebook, solutions=True), as_version=4)
    instructor_text = "\n".join(_source(c) for c in instructor.cells)
    assert all(line in instructor_text for line in solution_lines)
    assert STUB not in instructor_text and BEGIN not in instructor_text
    written = course.write_edition(tmp_path / "s", notebooks=[notebook])
    assert [p.read_text() for p in written] == [student]


def test_fixture_is_committed_clean():
    """The fixture has markers in the expected places and no outputs (it is built, not run)."""
    nb = nbformat.read(FIXTURE, as_version=4)
    assert sum(_source(c).count(BEGIN) for c in nb.cells) == 2
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


DECKS = REPO / "docs" / "course" / "slides"
VENDORED = ("reveal.js", "require.js")


def _offline_copy(out: Path) -> None:
    """The committed reveal.js and require.js beside the decks: tests never fetch them."""
    out.mkdir(parents=True, exist_ok=True)
    for name in VENDORED:
        src = DECKS / name
        if src.is_dir():
            shutil.copytree(src, out / name)
        else:
            shutil.copy(src, out / name)


def _deck_source(tmp_path: Path) -> Path:
    """The fixture plus a plot, a long printout and a long cell, as a lecture would have."""
    nb = nbformat.read(FIXTURE, as_version=4)
    plot = (
        "import matplotlib.pyplot as plt\n\nfig, ax = plt.subplots()\nax.plot([1, 2, 3], [3, 1, 2])"
    )
    long_print = "for i in range(40):\n    print(f'row {i}')"
    long_code = "\n".join(f"x{i} = {i}" for i in range(20)) + "\nprint('long cell done')"
    nb.cells += [
        nbformat.v4.new_markdown_cell("## A plot"),
        nbformat.v4.new_code_cell(plot),
        nbformat.v4.new_code_cell(long_print),
        nbformat.v4.new_code_cell(long_code),
        nbformat.v4.new_code_cell("import zeus_nb\nzeus_nb.record('kept_out_of_the_slides', 1)"),
    ]
    src = tmp_path / "in" / FIXTURE.name
    src.parent.mkdir()
    nbformat.write(nb, src)
    return src


@pytest.mark.slow
def test_slides_of_the_executed_notebook_show_plots_and_no_solution(tmp_path, capsys):
    """A deck executes the notebook, shows its plot, fits long cells, never gives a solution away
    and loads nothing from the network."""
    src, out = _deck_source(tmp_path), tmp_path / "s"
    _offline_copy(out)
    code = main(["course", "slides", str(src), "-o", str(out), "--smoke", "--backend", "sim"])
    assert code == 0
    page = (out / "exercises.slides.html").read_text()
    assert re.search(r'<img [^>]*src="data:image/png;base64,', page)  # the plot, executed
    assert "Exercise 1: average power" in page and "your turn" in page
    assert "measurement.total_energy / measurement.time" not in page  # the solution
    assert "all 4 cases right" not in page  # nor the check's verdict on it
    assert "row 0" in page and "row 39" not in page and "more lines in the notebook" in page
    assert "x0 = 0" not in page and "long cell done" in page  # a long cell: its output only
    assert "kept_out_of_the_slides" not in page  # record outputs are bookkeeping
    assert "In&nbsp;[" not in page and "In [" not in page
    loaded = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', page)
    assert loaded and all(not u.startswith(("http:", "https:", "//")) for u in loaded), loaded
    assert "reveal.js/dist/reveal.js" in page and (out / "reveal.js/dist/reveal.js").is_file()
    assert (out / "require.js").is_file() and (out / "jupyterlab.css").is_file()
    out_text = capsys.readouterr().out
    assert "exercises.slides.html" in out_text
    # a line as the notebook starts and as it is done: executing takes minutes
    assert "[1/1] exercises.ipynb: executing ..." in out_text
    assert re.search(r"\[1/1\] exercises.ipynb: done \(\d+ s\)", out_text)


def test_a_run_writes_a_notebook_name_papermill_accepts(tmp_path):
    """No papermill warning that the output "does not end in one of [.ipynb, .json]"."""
    from zeus_nb.runner.notebooks import partial_of

    assert partial_of(tmp_path / "01_x.ipynb").name == "01_x.partial.ipynb"


def test_slide_layout_cuts_cells_to_fit():
    from zeus_nb.course.slide_layout import BUDGET, HIDE_INPUT, lay_out, student_sources

    nb = nbformat.read(FIXTURE, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a\n" * 50)]
    deck = lay_out(nb, student_sources(nb))
    kinds = [c.metadata["slideshow"]["slide_type"] for c in deck.cells]
    assert kinds[0] == "slide" and "parameters" not in str([c.metadata for c in deck.cells])
    shown = [c for c in deck.cells if c.cell_type == "code"]
    assert all(STUB in c.source for c in shown if "exercise" in c.metadata.get("tags", []))
    for c in shown:
        for o in c.outputs:
            assert o.text.count("\n") <= BUDGET
    assert not any(HIDE_INPUT in c.metadata.get("tags", []) for c in shown)
    with pytest.raises(course.CourseError, match="exercise cell"):
        lay_out(nb, [])


def test_committed_decks_are_built_offline_from_executed_notebooks():
    """docs/course/slides: six decks with plots, reveal.js and its loader beside them."""
    decks = sorted(DECKS.glob("*.slides.html"))
    assert [d.name.split(".")[0] for d in decks] == [p.stem for p in REAL_NOTEBOOKS]
    for deck in decks:
        page = deck.read_text()
        assert "data:image/png;base64," in page, f"{deck.name} has no plot"
        loaded = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', page)
        assert all(not u.startswith(("http:", "https:", "//")) for u in loaded), deck.name
    for rel in ("reveal.js/dist/reveal.js", "reveal.js/plugin/notes/notes.js", "require.js"):
        assert (DECKS / rel).is_file(), rel
    # every exercise's stub is on a slide, and the decks carry the teacher's notes
    from zeus_nb.course.slide_layout import student_sources

    for deck, notebook in zip(decks, REAL_NOTEBOOKS, strict=True):
        page = deck.read_text()
        stubs = student_sources(nbformat.read(notebook, as_version=4), notebook.name)
        assert page.count("your turn") == len(stubs), deck.name
        assert page.count('<aside class="notes">') >= len(stubs) + 2, deck.name
        assert "Run All takes about" in page and "Known mistakes and the hint" in page


# --- every printed value says whose it is -----------------------------------------------------


def _names(node) -> set[str]:
    import ast

    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _unlabelled_prints(nb) -> list[str]:
    """Prints of a value an exercise's function computed (directly or through a variable) that
    do not say whose function it was (``check.whose``), in a cell where no earlier print did.

    After a wrong answer the notebook goes on with the reference function, so such a line would
    show the reference's value as if it were the student's.
    """
    import ast

    def from_check(node) -> bool:
        return isinstance(node, ast.Call) and ast.unparse(node.func).startswith("check.")

    tainted: set[str] = set()
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(_source(cell))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and from_check(node.value):
                tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and _names(node.value) & tainted:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    tainted |= _names(target)
        labelled = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "print":
                text = ast.unparse(node)
                labelled = labelled or "check.whose(" in text
                if _names(node) & tainted and not labelled:
                    found.append(text[:120])
    return found


@pytest.mark.parametrize("notebook", REAL_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_printed_exercise_value_says_whose_it_is(notebook):
    nb = nbformat.read(notebook, as_version=4)
    assert _unlabelled_prints(nb) == []


def test_an_unlabelled_exercise_value_is_caught():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("f = check.average_power(f)\nx = f(m) * 2"),
            nbformat.v4.new_code_cell("print(f'{x:.1f} W')"),
            nbformat.v4.new_code_cell("print(f\"{check.whose(f, 'f')} gives {x} W\")\nprint(x)"),
        ]
    )
    assert _unlabelled_prints(nb) == ["print(f'{x:.1f} W')"]


# --- slides: every exercise's stub, speaker notes for the teacher -----------------------------


@pytest.mark.parametrize("notebook", REAL_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_slide_shows_its_stub_and_the_teachers_notes(notebook):
    from zeus_nb.course.slide_layout import exercise_stub, lay_out, student_sources
    from zeus_nb.course.slide_notes import deck_notes

    source = nbformat.read(notebook, as_version=4)
    stubs = student_sources(source, notebook.name)
    deck = lay_out(source, stubs, notes=deck_notes(notebook.stem))
    code = [c.source for c in deck.cells if c.cell_type == "code"]
    notes = [c.source for c in deck.cells if c.metadata["slideshow"]["slide_type"] == "notes"]
    for stub in stubs:
        shown = exercise_stub(stub)
        assert shown in code, f"{notebook.name}: no slide shows {shown.splitlines()[0]}"
        assert STUB in shown and "= check." in shown.splitlines()[-1]
        name = re.findall(r"= check\.(\w+)\(", shown)[0]
        assert any(f"`check.{name}` tries" in n for n in notes), name
    assert notes and "Run All takes about" in notes[0]  # the first slide's note: run times
    # every section this deck has notes for is still a heading of the notebook
    from zeus_nb.course.slide_notes import SECTIONS

    headings = {
        line.lstrip("#").strip()
        for c in source.cells
        if c.cell_type == "markdown"
        for line in _source(c).splitlines()
        if line.startswith("#")
    }
    written = SECTIONS[notebook.stem]
    assert set(written) <= headings, sorted(set(written) - headings)
    assert sum(n in written.values() for n in notes) == len(written)


def _plain_words(text: str) -> str:
    """Markdown or rendered HTML as plain words: links, list markers, emphasis and code marks
    dropped, whitespace collapsed (slides wrap lines where the notebook does not)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(?m)^\s*(?:[-*+]|\d+\.)\s+", " ", text)
    return " ".join(re.sub(r"[`*_#>|]", " ", text).split())


def test_committed_decks_say_what_the_notebooks_say():
    """Every paragraph of every notebook's prose is in its deck: a notebook edited without
    rebuilding the slides (a run time measured again, a sentence corrected) fails here."""
    for notebook in REAL_NOTEBOOKS:
        page = (DECKS / f"{notebook.stem}.slides.html").read_text()
        page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
        deck = _plain_words(html.unescape(re.sub(r"<[^>]+>", " ", page)))
        cells = nbformat.read(notebook, as_version=4).cells
        prose = [
            p for c in cells if c.cell_type == "markdown" for p in re.split(r"\n\s*\n", c.source)
        ]
        stale = [w for w in map(_plain_words, prose) if w and w not in deck]
        assert not stale, f"{notebook.name}: rebuild its deck (docs/course/README.md): {stale[0]}"


def test_a_deck_laid_out_twice_is_the_same_deck():
    """Cell ids included (they are the slides' element ids): a rebuilt deck differs only where
    its notebook or notes changed."""
    from zeus_nb.course.slide_layout import lay_out, student_sources
    from zeus_nb.course.slide_notes import deck_notes

    notebook = REAL_NOTEBOOKS[0]
    decks = []
    for _ in range(2):
        source = nbformat.read(notebook, as_version=4)
        deck = lay_out(source, student_sources(source, notebook.name), deck_notes(notebook.stem))
        decks.append([(c.id, c.source) for c in deck.cells])
    assert decks[0] == decks[1]
    assert len({i for i, _ in decks[0]}) == len(decks[0])  # and unique


def test_slide_notes_cover_every_shipped_notebook():
    from zeus_nb.course.slide_notes import SECTIONS

    assert sorted(SECTIONS) == [p.stem for p in REAL_NOTEBOOKS]
