"""Course kit: student and solution versions of the notebooks, their verification, run times.

An exercise cell marks its solution code between two comment lines::

    def average_power(measurement):
        # BEGIN SOLUTION
        return measurement.total_energy / measurement.time
        # END SOLUTION

    average_power = check.average_power(average_power)

The student edition replaces the marked lines by one ``raise NotImplementedError`` ("your turn")
at the marker's indentation, so the cell still runs: the check after it says "not done yet" and
hands back the reference function, and the notebook runs on. The solution (instructor) edition
keeps the code and drops the markers. :func:`edition_text` and :func:`write_edition` give either
edition of a notebook, for whatever hands notebooks to students. Exercise cells are tagged
``exercise`` in both editions, and both are stripped of outputs, so nothing from an instructor's
run leaks into the students' copies.

:func:`verify` executes both editions with papermill: both must run to the end, solutions with
every (strict) check passed, students' copies with every exercise "not done yet".
:func:`grade` executes students' submissions and reports each exercise as passed, failed, not
attempted or error. :func:`timings` reads the run times papermill records in executed
notebooks, for the course's run-time table.
"""

from zeus_nb.course.grade import ExerciseResult, grade
from zeus_nb.course.markers import (
    BEGIN,
    END,
    EXERCISE_TAG,
    PASSED_MARK,
    STUB,
    VERSIONS,
    BuiltNotebook,
    CourseError,
    build,
    edition,
    edition_text,
    split_notebook,
    split_source,
    strip_outputs,
    write_edition,
)
from zeus_nb.course.timings import Timing, timings, timings_table
from zeus_nb.course.verify import Verification, execute_version, verify

__all__ = [
    "BEGIN",
    "END",
    "EXERCISE_TAG",
    "PASSED_MARK",
    "STUB",
    "VERSIONS",
    "BuiltNotebook",
    "CourseError",
    "ExerciseResult",
    "Timing",
    "Verification",
    "build",
    "edition",
    "edition_text",
    "execute_version",
    "grade",
    "split_notebook",
    "split_source",
    "strip_outputs",
    "timings",
    "timings_table",
    "verify",
    "write_edition",
]
