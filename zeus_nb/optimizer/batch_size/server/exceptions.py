"""Errors of the batch-size optimizer server, under Zeus's names, each with its HTTP status.

The router answers one of these with ``{"message": ...}`` and the error's ``status_code``: the
client turns that into :class:`~zeus_nb.optimizer.batch_size.exceptions.ZeusBSORuntimError`
carrying the message. They are :class:`~zeus_nb.errors.ZeusNbError` too.
"""

from __future__ import annotations

from zeus_nb.errors import ZeusNbError

__all__ = [
    "ZeusBSOJobConfigMismatchError",
    "ZeusBSOServerBaseError",
    "ZeusBSOServerNotFoundError",
    "ZeusBSOServerRuntimeError",
    "ZeusBSOServiceBadOperationError",
    "ZeusBSOValueError",
]


class ZeusBSOServerBaseError(ZeusNbError):
    """A request the server cannot carry out; ``status_code`` is the HTTP answer."""

    status_code = 500

    def __init__(self, msg: str) -> None:
        super().__init__(msg)


class ZeusBSOJobConfigMismatchError(ZeusBSOServerBaseError):
    """A job id is registered already, with other settings (409)."""

    status_code = 409


class ZeusBSOValueError(ZeusBSOServerBaseError):
    """A value in the request does not fit the job (400)."""

    status_code = 400


class ZeusBSOServerNotFoundError(ZeusBSOServerBaseError):
    """The job or trial named does not exist (404)."""

    status_code = 404


class ZeusBSOServiceBadOperationError(ZeusBSOServerBaseError):
    """The request comes out of order, e.g. a report for a trial never handed out (400)."""

    status_code = 400


class ZeusBSOServerRuntimeError(ZeusBSOServerBaseError):
    """The server itself failed (500)."""

    status_code = 500
