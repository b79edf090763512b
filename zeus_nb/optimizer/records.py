"""A small base for Zeus's message records (Zeus builds them on pydantic v1 models).

Zeus's optimizers exchange job, trial and schedule records with their servers as pydantic
models; user code builds them with keywords and sometimes calls ``dict()``, ``json()`` or
``parse_obj()``. zeus-nb keeps them as keyword-only dataclasses deriving from :class:`Record`,
which checks each class's ``_check()`` (base classes first) on construction and offers those
pydantic-v1 methods, without a pydantic dependency. As a pydantic-v1 model does, a record built
with keywords it does not have ignores them (Zeus's own simulator passes ``max_power=`` to
``TrainingResult``); they are logged at DEBUG level.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

log = logging.getLogger(__name__)


class _IgnoresUnknownKeywords(type):
    """Drops keyword arguments that are not fields before the dataclass ``__init__`` sees them."""

    def __call__(cls, *args: Any, **kwargs: Any):
        if dataclasses.is_dataclass(cls):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(k for k in kwargs if k not in names)
            if unknown:
                log.debug("%s ignores the unknown fields %s", cls.__name__, unknown)
                kwargs = {k: v for k, v in kwargs.items() if k in names}
        return super().__call__(*args, **kwargs)


class Record(metaclass=_IgnoresUnknownKeywords):
    """Validation on construction and the pydantic-v1 methods Zeus code uses."""

    def __post_init__(self) -> None:
        for klass in reversed(type(self).__mro__):
            check = klass.__dict__.get("_check")
            if check is not None:
                check(self)

    def dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def json(self) -> str:
        return json.dumps(self.dict())

    def copy(self, update: dict[str, Any] | None = None):
        return dataclasses.replace(self, **(update or {}))  # type: ignore[type-var]

    @classmethod
    def parse_obj(cls, obj: Any):
        """Build from a mapping, ignoring keys this record does not have (as pydantic does)."""
        return cls(**dict(obj))

    @classmethod
    def parse_raw(cls, text: str | bytes):
        return cls.parse_obj(json.loads(text))
