"""Reading an input file's bytes: the one way outside files are opened.

:func:`read_bytes` turns every way a path can be wrong (empty, missing, a folder, unreadable, not
a regular file, larger than its bound) into our error naming it; :func:`read_text` decodes UTF-8
with or without a byte-order mark; :func:`read_json` and :func:`read_ipynb` parse on top.
:func:`regular_file` checks a path a library will open itself (SQLite). A FIFO would block a
reader forever and ``/dev/zero`` never end, so nothing else opens outside files
(tests/test_reliability_discovery.py).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from zeus_nb.errors import (
    FolderNotFileError,
    InputError,
    InputFileError,
    MissingInputError,
    TraceFormatError,
)
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar

__all__ = [
    "MAX_BYTES",
    "MAX_NOTEBOOK_BYTES",
    "read_bytes",
    "read_ipynb",
    "read_json",
    "read_text",
    "regular_file",
]


#: The largest input file read by default, and the largest notebook: a bound on the memory and
#: time one read may take (a 50 MB log once took 75 s and 1.7 GB to parse). Schemas set their own
#: (:attr:`~zeus_nb.inputs.schema.Schema.max_bytes`).
MAX_BYTES = 8 << 20
MAX_NOTEBOOK_BYTES = 64 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int, p: Path, what: str) -> InputFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InputFileError(
        errno.EINVAL,
        f"is {kind}, not {_a(what)}; give a regular file (a copy saved to disk)",
        str(p),
    )


def _too_big(size: int, limit: int, p: Path, what: str) -> InputFileError:
    return InputFileError(
        errno.EFBIG,
        f"is {_size(size)}, more than the {_size(limit)} {_a(what)} may be; give a smaller file "
        "(keep the rows you need)",
        str(p),
    )


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _path(path: str | Path, what: str) -> Path:
    if isinstance(path, str) and not path.strip():
        raise InputError(f"the {what} path is empty; give a file")
    if not isinstance(path, (str, Path)):
        raise InputError(f"the {what} path {path!r} is not a path; give a file path")
    return Path(path).expanduser()


def regular_file(
    path: str | Path, what: str, max_bytes: int | None = MAX_BYTES, missing_ok: bool = False
) -> Path | None:
    """``path`` if it is a regular file of at most ``max_bytes``, else our error naming it.

    For readers that hand the path to a library (SQLite, PIL): a FIFO would block them forever
    and ``/dev/zero`` would never end. ``missing_ok``: None for a path that does not exist.
    """
    p = _path(path, what)
    try:
        st = p.stat()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise MissingInputError(errno.ENOENT, f"no such {what}; check the path", str(p)) from None
    except OSError as e:
        raise InputFileError(
            e.errno or errno.EIO, f"cannot read the {what} ({e.strerror or e})", str(p)
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise FolderNotFileError(
            errno.EISDIR, f"is a folder, not {_a(what)}; give the file", str(p)
        )
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(st.st_mode, p, what)
    if max_bytes is not None and st.st_size > max_bytes:
        raise _too_big(st.st_size, max_bytes, p, what)
    return p


def read_bytes(path: str | Path, what: str, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the input file ``path`` (a ``what``), or our error naming it.

    Only a regular file is read (a FIFO, a device or a socket is refused without waiting on
    it: the file is opened non-blocking and checked before any read), and at most
    ``max_bytes`` of it: a larger file is refused rather than read into memory.
    """
    p = _path(path, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise MissingInputError(errno.ENOENT, f"no such {what}; check the path", str(p)) from None
    except IsADirectoryError:
        raise FolderNotFileError(
            errno.EISDIR, f"is a folder, not {_a(what)}; give the file", str(p)
        ) from None
    except PermissionError:
        raise InputFileError(
            errno.EACCES,
            f"cannot read the {what} (permission denied); check its permissions",
            str(p),
        ) from None
    except OSError as e:
        raise InputFileError(
            e.errno or errno.EIO, f"cannot read the {what} ({e.strerror or e})", str(p)
        ) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FolderNotFileError(
                errno.EISDIR, f"is a folder, not {_a(what)}; give the file", str(p)
            )
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(st.st_mode, p, what)
        if st.st_size > max_bytes:
            raise _too_big(st.st_size, max_bytes, p, what)
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # it grew while being read
            raise _too_big(total, max_bytes, p, what)
        return b"".join(chunks)
    except InputFileError:
        raise
    except OSError as e:
        raise InputFileError(
            e.errno or errno.EIO, f"cannot read the {what} ({e.strerror or e})", str(p)
        ) from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str, max_bytes: int = MAX_BYTES) -> str:
    """The text of the input file ``path`` (a ``what``, e.g. "power trace"), or our error.

    Read through :func:`read_bytes` (a regular file, at most ``max_bytes``); UTF-8, with or
    without a byte-order mark.
    """
    p = _path(path, what)
    data = read_bytes(p, what, max_bytes)
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not part of the first column
    except UnicodeDecodeError as e:
        raise TraceFormatError(
            f"{p}: not a UTF-8 text file (byte {e.start}: {e.reason}); save the {what} as UTF-8"
        ) from None
    if "\x00" in text:
        raise TraceFormatError(f"{p}: holds NUL bytes, so it is not {_a(what)}; check the file")
    return text


def read_ipynb(path: str | Path, what: str = "notebook", max_bytes: int = MAX_NOTEBOOK_BYTES):
    """A Jupyter notebook (``nbformat`` node, version 4) read through :func:`read_text`;
    what is not a notebook is our error naming the file."""
    skip_iri_grammar()
    import nbformat

    text = read_text(path, what, max_bytes)
    try:
        return nbformat.reads(text, as_version=4)
    except (ValueError, AttributeError, KeyError, TypeError) as e:
        # nbformat's NotJSONError and ValidationError are ValueErrors
        raise TraceFormatError(
            f"{path}: not a readable {what} ({type(e).__name__}: {' '.join(str(e).split())[:160]})"
            "; open and save it in Jupyter, or leave it out"
        ) from None


def read_json(path: str | Path, what: str, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON value in ``path``, or our error naming the file and the position."""
    text = read_text(path, what, max_bytes)
    if not text.strip():
        raise TraceFormatError(f"{path}: the {what} is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceFormatError(
            f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}); the {what} may be "
            "cut short or edited by hand"
        ) from None


def _a(name: str) -> str:
    return ("an " if name[:1].lower() in "aeio" else "a ") + name
