"""Errors of the in-training batch-size optimizer, under Zeus's names.

They derive from :class:`~zeus_nb.errors.ZeusNbError`, so the CLI and notebooks show their
one-line message alone; catching Zeus's names works unchanged.
"""

from __future__ import annotations

from zeus_nb.errors import InputError, ZeusNbError


class ZeusBSORuntimError(ZeusNbError):
    """The store could not answer a request (Zeus's name, spelling included)."""


class ZeusBSOTrainFailError(ZeusNbError):
    """This recurrence will not reach the target (too costly, or out of epochs): stop it.

    The run has been reported; the next recurrence picks another batch size.
    """


class ZeusBSOConfigError(ZeusNbError):
    """The training setup does not fit the optimizer (no GPU, GPUs of different models)."""


class ZeusBSOOperationOrderError(ZeusNbError):
    """The optimizer's methods were called out of order (get_batch_size comes first)."""


class ZeusBSOBadOperationError(ZeusNbError):
    """An operation this process may not do (only rank 0 asks for the batch size)."""


class JobSpecError(ZeusBSOConfigError, InputError):
    """A ``JobSpec`` field is out of range; the message names the field."""


__all__ = [
    "JobSpecError",
    "ZeusBSOBadOperationError",
    "ZeusBSOConfigError",
    "ZeusBSOOperationOrderError",
    "ZeusBSORuntimError",
    "ZeusBSOTrainFailError",
]
