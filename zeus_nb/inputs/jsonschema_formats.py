"""jsonschema without the IRI grammar it builds at import, in processes that read notebooks.

nbformat (and so papermill) validates notebooks with jsonschema. Where rfc3987-syntax is
installed (JupyterLab's jupyter-events installs it), jsonschema builds that package's IRI
grammar when it imports: about 2.3 s of CPU in every process that reads a notebook, for the
"iri" string formats, which no notebook schema uses (tests/test_jsonschema_formats.py checks
nbformat's schemas).
"""

from __future__ import annotations

import sys


def skip_iri_grammar() -> None:
    """Import jsonschema with ``rfc3987_syntax`` hidden, unless jsonschema is imported already.

    Hidden only while jsonschema imports, so a later ``import rfc3987_syntax`` works as usual;
    jsonschema in this process then checks no IRI format, as where that package is not
    installed. Called before nbformat or papermill is imported.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import jsonschema  # noqa: F401  (its formats module tries rfc3987_syntax, once)
    finally:
        if "rfc3987_syntax" in sys.modules and sys.modules["rfc3987_syntax"] is None:
            del sys.modules["rfc3987_syntax"]
