"""Optional extras: which ones are installed, and a one-line skip for notebook sections.

A base install (``pip install zeus-nb``) runs every notebook. A section that needs an extra asks
:func:`skip_unless` first: with the extra installed it gets ``None`` and runs; without it, one
line says what is skipped and how to install it, and the returned reason is what the notebook
records (``zeus_nb.record``), so ``zeus-nb tour`` shows the skip.
"""

from __future__ import annotations

import importlib.util

from zeus_nb.errors import InputError

# extra (as in `pip install 'zeus-nb[hf]'`) -> modules it provides; mirrors pyproject.toml
EXTRAS: dict[str, tuple[str, ...]] = {"hf": ("transformers", "accelerate")}

# Every extra's importable top-level modules (package names differ from module names here),
# so a missing one is reported with the extra to install (zeus_nb.utils.boundary.needs_extra).
MODULES: dict[str, tuple[str, ...]] = {
    **EXTRAS,
    "docs": ("mkdocs", "material", "mkdocs_jupyter"),
    "cluster": ("dask", "distributed", "dask_jobqueue", "sqlalchemy", "psycopg"),
    "prometheus": ("prometheus_client",),
    "net": ("httpx", "requests"),
    "server": ("fastapi", "starlette", "sqlalchemy", "aiosqlite", "pydantic", "httpx", "uvicorn"),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported (empty: the extra is installed)."""
    try:
        modules = EXTRAS[extra]
    except KeyError:
        raise InputError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}") from None
    return [m for m in modules if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'zeus-nb[{extra}]'"


def skip_unless(extra: str, what: str) -> str | None:
    """None when ``extra`` is installed; else print one line about skipping ``what``.

    Returns the short reason to record, e.g. ``"needs transformers: pip install 'zeus-nb[hf]'"``.
    """
    absent = missing(extra)
    if not absent:
        return None
    reason = f"needs {', '.join(absent)}: {install_hint(extra)}"
    print(f"Skipping {what}: it {reason}")
    return reason
