"""Exceptions that say what to do next.

Every error zeus-nb raises on purpose derives from :class:`ZeusNbError`, so the CLI can print the
message alone (no traceback) and exit non-zero.
"""

from __future__ import annotations


class ZeusNbError(Exception):
    """Base class of the errors zeus-nb raises on purpose.

    It is also Zeus's ``ZeusBaseError`` (:mod:`zeus_nb.exception`): one hierarchy, so Zeus code's
    ``except ZeusBaseError`` catches every zeus-nb error and the CLI prints Zeus-named errors as
    one line too. Like Zeus's, it takes the message first and keeps it as :attr:`message`.
    """

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(message, *args)

    @property
    def message(self) -> str:
        """The one-line message (Zeus's attribute name)."""
        return str(self.args[0]) if self.args else ""


class NoGPUError(ZeusNbError):
    """No NVIDIA driver or NVML library: the real backend cannot start."""


class DeviceError(ZeusNbError):
    """NVML reported an error that zeus-nb has no special advice for."""


class PowerLimitPermissionError(ZeusNbError, PermissionError):
    """This process may not change GPU power limits."""


class ClockPermissionError(ZeusNbError, PermissionError):
    """This process may not lock or reset GPU clocks."""


class UnsupportedError(ZeusNbError):
    """The GPU does not support a feature (for example the energy counter)."""


class InputError(ZeusNbError, ValueError):
    """A number or value from outside (file, parameter, environment) is unusable; says which."""


class TraceFormatError(InputError):
    """A trace or log file does not follow the expected schema."""


class TraceNotFoundError(InputError, FileNotFoundError):
    """A trace file named by the user does not exist."""


class SimulationError(ZeusNbError, RuntimeError):
    """A trace-driven simulation cannot go on (say, a job that never reaches its target)."""


class CallbackOrderError(ZeusNbError, RuntimeError):
    """Training-loop hooks were called out of their documented order."""


class WindowError(ZeusNbError, ValueError):
    """A measurement window was begun twice or ended without being begun."""


class TargetFunctionError(ZeusNbError, RuntimeError):
    """A function handed to zeus-nb to run and measure (a profiling target) raised or did no work.

    The function's own exception is chained as ``__cause__``.
    """


NO_DRIVER_HINT = "no NVIDIA driver found; use the simulated backend: ZEUS_NB_BACKEND=sim"
NO_PERMISSION_HINT = (
    "changing GPU power limits needs root or the SYS_ADMIN capability; in Docker, start the "
    "container with `docker run --gpus all --cap-add SYS_ADMIN --user root ...`"
)


class CpuEnergyError(ZeusNbError):
    """CPU (RAPL) energy cannot be read on this machine."""


class CpuEnergyPermissionError(CpuEnergyError, PermissionError):
    """The RAPL energy counters exist but this process may not read them."""


class IntensityProviderError(ZeusNbError):
    """A carbon-intensity or electricity-price source failed or returned nothing usable."""


class InputFileError(ZeusNbError, OSError):
    """An input file is missing, a folder, or unreadable; names it and says what to give.

    Raised as ``InputFileError(errno, "what is wrong; what to do", path)``: an ``OSError`` (so
    ``except OSError`` still sees it) whose message is the path and the advice on one line.
    """

    def __str__(self) -> str:
        return (
            f"{self.filename}: {self.strerror}" if self.filename is not None else super().__str__()
        )


class MissingInputError(InputFileError, FileNotFoundError):
    """An input file that does not exist."""


class FolderNotFileError(InputFileError, IsADirectoryError):
    """A folder given where an input file is needed."""


class UsageError(InputError):
    """Command-line options that do not fit together (a knob of another choice, an empty value)."""


class ExtraMissingError(ZeusNbError, ImportError):
    """A feature needs an optional extra that is not installed; names the pip command."""
