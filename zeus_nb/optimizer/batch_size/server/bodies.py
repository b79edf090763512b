"""The server's HTTP boundary: request bodies and query values through the records' own checks.

A body is read up to :data:`MAX_BODY_BYTES` (a larger one is answered 413 before it is read,
or as soon as it passes the limit), parsed as JSON and built into its record
(:mod:`zeus_nb.optimizer.batch_size.common`), whose checks are the ones a Python caller
meets: one validation for both sides (``NaN``, which Python's JSON reads, is refused there
with the field's name). Every refusal is a :class:`BadRequest` that the router answers as
4xx JSON naming the field.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from zeus_nb.errors import InputError
from zeus_nb.optimizer.batch_size.common import check_id

__all__ = ["MAX_BODY_BYTES", "BadRequest", "BodyLimit", "job_id_param", "parse_body"]

#: Largest request body (bytes). A job's registration is under 2 KB; 64 KiB leaves room for
#: a long batch-size list while a 15 MB body can no longer hold the event loop for seconds.
MAX_BODY_BYTES = 64 * 1024

R = TypeVar("R")


class BadRequest(InputError):
    """A request the server refuses; ``status_code`` is its 4xx answer."""

    def __init__(self, message: str, status_code: int = 422) -> None:
        super().__init__(message)
        self.status_code = status_code


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is answered 413 (declared or streamed)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        try:
            too_big = declared is not None and int(declared) > self.limit
        except ValueError:
            too_big = False
        if too_big:
            await _answer(send, 413, self._message())
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooBig()
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooBig:
            if not started:
                await _answer(send, 413, self._message())

    def _message(self) -> str:
        return (
            f"the request body is larger than {self.limit} bytes; a batch-size optimizer "
            "request is a few hundred bytes: check what the client sends"
        )


class _TooBig(Exception):
    pass


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def parse_body(raw: bytes, record: type[R], what: str) -> R:
    """``raw`` (JSON) as a ``record``, checked by the record itself; else a 422 naming why."""
    try:
        data = json.loads(raw)  # NaN and Infinity reach the record's check, which names the field
    except RecursionError:
        raise BadRequest(f"{what}: the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"{what}: the body is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise BadRequest(f"{what}: the body must be a JSON object, got {type(data).__name__}")
    try:
        return record.parse_obj(data)  # type: ignore[attr-defined]
    except InputError as e:
        raise BadRequest(f"{what}: {e}") from None
    except TypeError as e:  # a required field missing
        text = str(e).split(".", 1)[-1].split("() ", 1)[-1]
        raise BadRequest(f"{what}: {text}") from None


def job_id_param(value: Any) -> str:
    """A ``job_id`` query value, checked as a body's is."""
    try:
        return check_id("job_id", value)
    except InputError as e:
        raise BadRequest(str(e)) from None
