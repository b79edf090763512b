"""The in-training client's connection to a batch-size optimizer server (Zeus's HTTP routes).

:class:`ServerConnection` sends Zeus's JSON records to the routes of
:mod:`zeus_nb.optimizer.batch_size.common` with ``httpx`` (looked up at each call, so tests may
route its functions to an app) and turns every failure into
:class:`~zeus_nb.optimizer.batch_size.exceptions.ZeusBSORuntimError` with the server's message.
:func:`server_base` says whether a ``server_url`` names a server at all (else it is a store).
"""

from __future__ import annotations

import json
from typing import Any

from zeus_nb.optimizer.batch_size.common import (
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
from zeus_nb.optimizer.batch_size.exceptions import ZeusBSORuntimError

__all__ = ["TIMEOUT", "ServerConnection", "server_base"]

TIMEOUT = 30.0  # s a request may take (the server answers in milliseconds)


def server_base(server_url: Any) -> str | None:
    """The base URL the routes are appended to, or None when ``server_url`` names a store.

    ``http://`` and ``https://`` URLs name a server; so does the empty string, Zeus's literal
    meaning (routes relative to nothing: only useful where ``httpx`` is routed to an app, as in
    Zeus's tests).
    """
    if not isinstance(server_url, str):
        return None
    text = server_url.strip()
    if text == "":
        return ""
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    return text.rstrip("/") if scheme in ("http", "https") else None


def _message(response: Any) -> str:
    """The server's explanation: ``{"message": ...}`` (ours, Zeus's) or FastAPI's ``detail``."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    if isinstance(body, dict) and isinstance(body.get("detail"), list):
        return "; ".join(str(d.get("msg", d)) for d in body["detail"] if isinstance(d, dict))
    return json.dumps(body)[:500]


class ServerConnection:
    """Zeus's four requests of a training run, to the server at ``url``."""

    def __init__(self, url: str, timeout: float = TIMEOUT) -> None:
        self.url = url
        self.timeout = timeout

    def _send(self, method: str, route: str, **kwargs: Any) -> Any:
        """One request; returns the decoded JSON answer."""
        import httpx

        call = getattr(httpx, method)
        where = self.url or "(server_url is empty)"
        try:
            response = call(self.url + route, timeout=self.timeout, **kwargs)
        except httpx.HTTPError as e:
            raise ZeusBSORuntimError(
                f"cannot reach the batch-size optimizer server at {where} ({e}); start it "
                "(zeus-nb bso serve) and give its http:// URL as server_url, or give a store "
                "(sqlite:///PATH) to work without a server"
            ) from e
        if not 200 <= response.status_code < 300:
            raise ZeusBSORuntimError(
                f"the batch-size optimizer server at {where} answered {response.status_code} "
                f"to {method.upper()} {route}: {_message(response)}"
            )
        try:
            return response.json()
        except ValueError as e:
            raise ZeusBSORuntimError(
                f"the batch-size optimizer server at {where} answered {method.upper()} {route} "
                f"with no JSON ({response.text[:200]!r}); is {where} zeus-nb's or Zeus's server?"
            ) from e

    def register(self, spec: JobSpecFromClient) -> CreatedJob:
        """Register the job (or check a registered one has the same settings)."""
        return CreatedJob.parse_obj(self._send("post", REGISTER_JOB_URL, json=spec.dict()))

    def next_trial(self, job_id: str) -> TrialId:
        """The batch size of this run and its trial number."""
        answer = self._send("get", GET_NEXT_BATCH_SIZE_URL, params={"job_id": job_id})
        return TrialId.parse_obj(answer)

    def report(self, result: TrainingResult) -> ReportResponse:
        """The verdict on the run after an epoch."""
        return ReportResponse.parse_obj(self._send("post", REPORT_RESULT_URL, json=result.dict()))

    def end_trial(self, trial: TrialId) -> None:
        """End a trial whose run will not report (it counts as failed)."""
        self._send("patch", REPORT_END_URL, json=trial.dict())
