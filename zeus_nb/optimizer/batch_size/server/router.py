"""The batch-size optimizer server's FastAPI app: Zeus's routes and JSON bodies.

Serve it with ``zeus-nb bso serve`` or ``uvicorn zeus_nb.optimizer.batch_size.server.router:app``.
Each request runs in one database transaction, committed when it succeeded and rolled back
otherwise, and requests about one job (about one job id prefix, for registrations) take turns.
On SQLite, which takes one writer at a time, the process's transactions also take turns in the
event loop (:data:`WRITE_LOCKS`, one per database) before they take the file's lock: waiting
in SQLite instead sleeps in its busy handler (up to 100 ms between tries), idle while the
lock is free. Other processes sharing the file still wait for it there.
An error answers ``{"message": "..."}`` with the error's status: 400, 404 and 409 as Zeus's
server answers them, 422 for a value out of range, 500 when the server itself failed.

Zeus's client sends JSON bodies without a content type; the app reads them as JSON all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncSession

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.optimizer.batch_size.common import (
    DELETE_JOB_URL,
    GET_NEXT_BATCH_SIZE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    CreatedJob,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
)
from zeus_nb.optimizer.batch_size.server.bodies import (
    BadRequest,
    BodyLimit,
    job_id_param,
    parse_body,
)
from zeus_nb.optimizer.batch_size.server.database.db_connection import get_db_session
from zeus_nb.optimizer.batch_size.server.exceptions import ZeusBSOServerBaseError
from zeus_nb.optimizer.batch_size.server.service import BatchSizeService

__all__ = [
    "JOB_LOCKS",
    "PREFIX_LOCKS",
    "WRITE_LOCKS",
    "app",
    "get_job_locks",
    "get_prefix_locks",
]

log = logging.getLogger(__name__)


class LockTable:
    """One :class:`asyncio.Lock` per key and event loop (``table[key]``), made on first use.

    Locks are per loop because an asyncio lock belongs to the loop it first waited in, and one
    process may serve from several loops over its life (tests start one per client).
    """

    def __init__(self) -> None:
        self._locks: dict[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = {}

    def __getitem__(self, key: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if loop not in self._locks:
            for old in [old for old in self._locks if old.is_closed()]:
                del self._locks[old]
        table = self._locks.setdefault(loop, {})
        return table.setdefault(key, asyncio.Lock())

    def pop(self, key: str) -> None:
        """Forget ``key``'s lock in this loop (its job is gone)."""
        table = self._locks.get(asyncio.get_running_loop(), {})
        lock = table.get(key)
        if lock is not None and not lock.locked():
            del table[key]


JOB_LOCKS = LockTable()
PREFIX_LOCKS = LockTable()
#: One lock per SQLite database (by URL): its transactions in this process take turns.
WRITE_LOCKS = LockTable()


def get_job_locks() -> LockTable:
    """The per-job locks (a FastAPI dependency)."""
    return JOB_LOCKS


def get_prefix_locks() -> LockTable:
    """The per-job-id-prefix locks of registrations (a FastAPI dependency)."""
    return PREFIX_LOCKS


Session = Annotated[AsyncSession, Depends(get_db_session)]
JobLocks = Annotated[LockTable, Depends(get_job_locks)]
PrefixLocks = Annotated[LockTable, Depends(get_prefix_locks)]

# Read bodies sent without a content type as JSON (FastAPI >= 0.120 would refuse them).
_LENIENT = {"strict_content_type": False}
_OPTIONS = _LENIENT if "strict_content_type" in inspect.signature(FastAPI).parameters else {}

app = FastAPI(
    title="zeus-nb batch-size optimizer server",
    description="Zeus's batch-size optimizer server over a zeus-nb store.",
    **_OPTIONS,
)


def _body_schema(record: type) -> dict:
    """The OpenAPI entry of a JSON body the route reads itself (see :mod:`.bodies`)."""
    schema = TypeAdapter(record).json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _error(code: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=code, content={"message": message})


def _writer(session: AsyncSession) -> contextlib.AbstractAsyncContextManager:
    """The turn a transaction on ``session``'s database waits for: its SQLite database's lock
    in this process; none on a database that takes concurrent writers (PostgreSQL)."""
    bind = session.bind
    if bind is None or bind.dialect.name != "sqlite":
        return contextlib.nullcontext()
    return WRITE_LOCKS[bind.url.render_as_string(hide_password=False)]


async def _transaction(session: AsyncSession, work: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``work`` and commit (in the database's turn, :func:`_writer`), or roll back and
    answer its error."""
    async with _writer(session):
        return await _committed(session, work)


async def _committed(session: AsyncSession, work: Callable[[], Awaitable[Any]]) -> Any:
    try:
        result = await work()
        await session.commit()
        return result
    except ZeusBSOServerBaseError as e:
        await session.rollback()
        return _error(e.status_code, e.message)
    except BadRequest as e:
        await session.rollback()
        return _error(e.status_code, e.message)
    except InputError as e:
        await session.rollback()
        return _error(422, e.message)
    except ZeusNbError as e:  # a damaged or newer store
        await session.rollback()
        log.error("%s", e)
        return _error(status.HTTP_500_INTERNAL_SERVER_ERROR, e.message)
    except Exception as e:
        await session.rollback()
        log.exception("the batch-size optimizer server failed")
        return _error(status.HTTP_500_INTERNAL_SERVER_ERROR, f"the server failed: {e}")


def _body(record: type, what: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency reading the request's body as ``record`` (:func:`.bodies.parse_body`, the
    one validation HTTP and Python share); a bad body raises :class:`.BadRequest`, answered by
    :func:`_bad_request`. Routes take the record under Zeus's parameter name."""

    async def read(request: Request) -> Any:
        return parse_body(await request.body(), record, what)

    return read


JobBody = Annotated[JobSpecFromClient, Depends(_body(JobSpecFromClient, "the job (POST /jobs)"))]
TrialBody = Annotated[TrialId, Depends(_body(TrialId, "the trial (PATCH /trials)"))]
ResultBody = Annotated[TrainingResult, Depends(_body(TrainingResult, "the report (POST /report)"))]


@app.post(
    REGISTER_JOB_URL,
    responses={200: {"description": "registered already"}, 201: {"description": "registered"}},
    response_model=CreatedJob,
    openapi_extra=_body_schema(JobSpecFromClient),
)
async def register_job(
    job: JobBody, response: Response, db_session: Session, prefix_locks: PrefixLocks
):
    """Register a job (201), or check that a registered one has these settings (200)."""

    async def work():
        created, new = await BatchSizeService(db_session).register_job(job)
        response.status_code = status.HTTP_201_CREATED if new else status.HTTP_200_OK
        return created

    async with prefix_locks[job.job_id_prefix]:
        return await _transaction(db_session, work)


@app.delete(DELETE_JOB_URL)
async def delete_job(job_id: str, db_session: Session, job_locks: JobLocks):
    """Forget a job and its runs (404 if there is no such job)."""
    job_id = job_id_param(job_id)  # a bad one: BadRequest, answered by _bad_request
    async with job_locks[job_id]:
        answer = await _transaction(
            db_session, lambda: BatchSizeService(db_session).delete_job(job_id)
        )
    job_locks.pop(job_id)
    return answer


@app.patch(REPORT_END_URL, openapi_extra=_body_schema(TrialId))
async def end_trial(trial: TrialBody, db_session: Session, job_locks: JobLocks):
    """End a trial whose run exits without a verdict (it counts as failed)."""
    async with job_locks[trial.job_id]:
        return await _transaction(db_session, lambda: BatchSizeService(db_session).end_trial(trial))


@app.get(GET_NEXT_BATCH_SIZE_URL, response_model=TrialId)
async def predict(job_id: str, db_session: Session, job_locks: JobLocks):
    """The batch size of the job's next run, as a new trial."""
    job_id = job_id_param(job_id)  # a bad one: BadRequest, answered by _bad_request
    async with job_locks[job_id]:
        return await _transaction(db_session, lambda: BatchSizeService(db_session).predict(job_id))


@app.post(
    REPORT_RESULT_URL,
    response_model=ReportResponse,
    openapi_extra=_body_schema(TrainingResult),
)
async def report(result: ResultBody, db_session: Session, job_locks: JobLocks):
    """Judge a run after an epoch: go on, or stop (and whether it reached the target)."""
    async with job_locks[result.job_id]:
        return await _transaction(db_session, lambda: BatchSizeService(db_session).report(result))


@app.exception_handler(BadRequest)
async def _bad_request(_request: Request, exc: BadRequest) -> JSONResponse:
    """A body or parameter the one validation refused: its status and message."""
    return _error(exc.status_code, exc.message)


@app.exception_handler(RequestValidationError)
async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's own checks (a missing query value) as our JSON, never echoing the value (a
    NaN or a lone surrogate could not be written as JSON)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "the request"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return _error(422, "; ".join(parts) or "the request is not valid")


@app.exception_handler(Exception)
async def _failed(_request: Request, exc: Exception) -> JSONResponse:
    log.error("the batch-size optimizer server failed", exc_info=exc)
    return _error(500, f"the server failed: {type(exc).__name__}; see the server's log")


app.add_middleware(BodyLimit)
