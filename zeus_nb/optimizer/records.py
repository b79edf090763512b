"""A small base for Zeus's message records (Zeus builds them on pydantic v1 models).

Zeus's optimizers exchange job, trial and schedule records with their servers as pydantic
models; user code builds them with keywords and sometimes calls ``dict()``, ``json()`` or
``parse_obj()``. zeus-nb keeps them as keyword-only dataclasses deriving from :class:`Record`,
which checks each class's ``_check()`` (base classes first) on construction and offers those
pydantic-v1 methods, without a pydantic dependency.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any


class Record:
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
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in dict(obj).items() if k in names})

    @classmethod
    def parse_raw(cls, text: str | bytes):
        return cls.parse_obj(json.loads(text))
