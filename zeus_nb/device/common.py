"""Helpers shared by Zeus's device API: the SYS_ADMIN check and deprecated camelCase names.

Zeus renamed its device methods from camelCase (``getPowerManagementLimitConstraints``) to
snake_case and keeps the old names as deprecated aliases. :func:`deprecated_alias` marks a method
with its old name and :class:`DeprecatedAliasABCMeta` adds the alias to the class, so old Zeus
code keeps running and learns the new name from a ``DeprecationWarning``.
"""

from __future__ import annotations

import abc
import os
import warnings
from collections.abc import Callable
from pathlib import Path

from zeus_nb.inputs.registry import system_read

__all__ = ["CAP_SYS_ADMIN", "DeprecatedAliasABCMeta", "deprecated_alias", "has_sys_admin"]

#: Bit of CAP_SYS_ADMIN in a Linux capability mask.
CAP_SYS_ADMIN = 21

_ALIAS_MARK = "_deprecated_alias"


@system_read("/proc/self/status (kernel)")
def has_sys_admin() -> bool:
    """Whether this process holds CAP_SYS_ADMIN (what NVML needs to set power limits and clocks).

    Read from the effective capability mask in ``/proc/self/status``; where that file cannot be
    read (not Linux), being root stands for it.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0 if hasattr(os, "geteuid") else False


def deprecated_alias(old_name: str) -> Callable[[Callable], Callable]:
    """Mark a method as also reachable by ``old_name``, its deprecated camelCase name.

    The alias itself is added by :class:`DeprecatedAliasABCMeta`, the metaclass of the class.
    """

    def mark(func: Callable) -> Callable:
        setattr(func, _ALIAS_MARK, old_name)
        return func

    return mark


def _alias(old_name: str, new_name: str, doc: str | None) -> Callable:
    """A method named ``old_name`` that warns once, then calls ``new_name`` on the instance.

    Calling through ``getattr`` lets a subclass's override of ``new_name`` serve the alias too.
    """
    warned = False

    def alias(self, *args, **kwargs):
        nonlocal warned
        if not warned:
            warned = True
            warnings.warn(
                f"{old_name!r} is deprecated; call {new_name!r} instead",
                DeprecationWarning,
                stacklevel=2,
            )
        return getattr(self, new_name)(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old_name
    alias.__doc__ = f"Deprecated name of :meth:`{new_name}`." + (f"\n\n{doc}" if doc else "")
    return alias


class DeprecatedAliasABCMeta(abc.ABCMeta):
    """An ABC metaclass that adds the deprecated alias of every method marked with
    :func:`deprecated_alias` (on the class itself or inherited)."""

    def __new__(mcs, name, bases, namespace, **kwargs):
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        for attr in dir(cls):
            if attr.startswith("_"):
                continue
            old = getattr(getattr(cls, attr, None), _ALIAS_MARK, None)
            if isinstance(old, str) and old not in namespace:
                setattr(cls, old, _alias(old, attr, getattr(cls, attr).__doc__))
        return cls
