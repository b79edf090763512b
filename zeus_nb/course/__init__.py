"""Course kit: student and solution versions of the notebooks, their verification, run times.

An exercise cell marks its solution code between two comment lines::

    def average_power(measurement):
        # BEGIN SOLUTION
        return measurement.total_energy / measurement.time
        # END SOLUTION

    check.average_power(average_power)

The student version replaces the marked lines by one ``raise NotImplementedError`` at the marker's
indentation, so the cell still runs and the check call after it reports the missing answer; the
solution version keeps the code and drops the markers. Exercise cells are tagged ``exercise`` in
both versions, and both are stripped of outputs, so nothing from an instructor's run leaks into
the students' copies.

:func:`verify` executes both versions with papermill: solutions must run to the end, and students'
copies must stop at their first exercise with ``NotImplementedError`` and nothing else.
:func:`grade` executes students' submissions and reports each exercise as passed, failed or not
run. :func:`timings` reads the run times papermill records in executed notebooks, for the course's
run-time table.
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
    split_notebook,
    split_source,
    strip_outputs,
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
    "execute_version",
    "grade",
    "split_notebook",
    "split_source",
    "strip_outputs",
    "timings",
    "timings_table",
    "verify",
]
