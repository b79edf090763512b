"""Trials: the runs of a job handed out by the in-training client, numbered 1, 2, ... per job.

Zeus's optimizer server numbers every batch size it hands out (a *trial*), marks it finished
when the run reports its verdict, and failed when the process exits without one. The bandit
itself learns only from observations (:mod:`zeus_nb.optimizer.batch_size.store`); trials are the
bookkeeping around them, so that each run has a unique number even when recurrences of one job
run at once, and a run that crashed is visible as such.

Each store keeps trials in its own way: :class:`MemoryTrials` and :class:`SQLiteTrials` are
mixed into the in-memory and SQLite stores; the SQL server store has its own table
(:mod:`zeus_nb.optimizer.batch_size.sql_store`). The table is an addition that older zeus-nb
versions ignore, so it does not change the store's schema version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DISPATCHED, SUCCEEDED, FAILED = "dispatched", "succeeded", "failed"
STATUSES = (DISPATCHED, SUCCEEDED, FAILED)

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    job TEXT NOT NULL REFERENCES jobs(name),
    trial_number INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    status TEXT NOT NULL,
    observation INTEGER,
    PRIMARY KEY (job, trial_number)
);
"""


@dataclass(frozen=True)
class Trial:
    """One handed-out run: ``status`` is dispatched, succeeded (it reported) or failed (it
    ended without reporting); ``observation`` is the id of its report, if any."""

    job: str
    trial_number: int
    batch_size: int
    status: str = DISPATCHED
    observation: int | None = None


def check_status(status: str) -> None:
    if status not in (SUCCEEDED, FAILED):
        raise ValueError(f"a trial ends as {SUCCEEDED!r} or {FAILED!r}, not {status!r}")


class MemoryTrials:
    """Trials of :class:`~zeus_nb.optimizer.batch_size.store.MemoryStore`."""

    def _trial_list(self, name: str) -> list[Trial]:
        self._require(name)  # type: ignore[attr-defined]
        table = self.__dict__.setdefault("_trials", {})
        return table.setdefault(name, [])

    def new_trial(self, name: str, batch_size: int) -> int:
        """Hand out ``batch_size`` as the job's next trial; returns its number."""
        rows = self._trial_list(name)
        number = rows[-1].trial_number + 1 if rows else 1
        rows.append(Trial(name, number, int(batch_size)))
        return number

    def end_trial(
        self, name: str, trial_number: int, status: str, observation: int | None = None
    ) -> bool:
        """Mark a dispatched trial ended; False if it had ended already (or is unknown)."""
        check_status(status)
        rows = self._trial_list(name)
        for i, t in enumerate(rows):
            if t.trial_number == trial_number and t.status == DISPATCHED:
                rows[i] = replace(t, status=status, observation=observation)
                return True
        return False

    def trials(self, name: str) -> list[Trial]:
        return list(self._trial_list(name))


class SQLiteTrials:
    """Trials of :class:`~zeus_nb.optimizer.batch_size.sqlite_store.SQLiteStore` (its ``trials``
    table; numbers are taken inside the write transaction, so concurrent runs never share one)."""

    def new_trial(self, name: str, batch_size: int) -> int:
        with self._write() as conn:  # type: ignore[attr-defined]
            self._require(name)  # type: ignore[attr-defined]
            (last,) = conn.execute(
                "SELECT MAX(trial_number) FROM trials WHERE job = ?", (name,)
            ).fetchone()
            number = int(last or 0) + 1
            conn.execute(
                "INSERT INTO trials(job, trial_number, batch_size, status) VALUES (?, ?, ?, ?)",
                (name, number, int(batch_size), DISPATCHED),
            )
            return number

    def end_trial(
        self, name: str, trial_number: int, status: str, observation: int | None = None
    ) -> bool:
        check_status(status)
        with self._write() as conn:  # type: ignore[attr-defined]
            cur = conn.execute(
                "UPDATE trials SET status = ?, observation = ? "
                "WHERE job = ? AND trial_number = ? AND status = ?",
                (status, observation, name, int(trial_number), DISPATCHED),
            )
            return cur.rowcount == 1

    def trials(self, name: str) -> list[Trial]:
        rows = self._query(  # type: ignore[attr-defined]
            "SELECT job, trial_number, batch_size, status, observation FROM trials "
            "WHERE job = ? ORDER BY trial_number",
            (name,),
        )
        return [Trial(r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in rows]
