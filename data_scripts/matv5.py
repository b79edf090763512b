"""Just enough of the MATLAB 5 MAT-file format to read and write the ImageNet devkit's meta.mat.

The ILSVRC2012 devkit describes its classes in ``data/meta.mat`` (a struct array ``synsets``).
Reading it usually needs scipy; this module needs only the standard library, so the data scripts
run on a bare data server. It handles numeric, char, cell and struct arrays, little- and
big-endian files, and compressed (MATLAB 7) elements. Not supported: sparse arrays, objects,
complex numbers, and v7.3 (HDF5) files.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

# data types of data elements
MI_INT8, MI_UINT8, MI_INT16, MI_UINT16, MI_INT32, MI_UINT32 = 1, 2, 3, 4, 5, 6
MI_SINGLE, MI_DOUBLE, MI_INT64, MI_UINT64 = 7, 9, 12, 13
MI_MATRIX, MI_COMPRESSED, MI_UTF8, MI_UTF16, MI_UTF32 = 14, 15, 16, 17, 18
_NUMERIC = {
    MI_INT8: "b",
    MI_UINT8: "B",
    MI_INT16: "h",
    MI_UINT16: "H",
    MI_INT32: "i",
    MI_UINT32: "I",
    MI_SINGLE: "f",
    MI_DOUBLE: "d",
    MI_INT64: "q",
    MI_UINT64: "Q",
}
# array classes
MX_CELL, MX_STRUCT, MX_OBJECT, MX_CHAR, MX_SPARSE, MX_DOUBLE = 1, 2, 3, 4, 5, 6


class MatFileError(ValueError):
    """The bytes are not a MAT-file this module understands."""


class _Reader:
    def __init__(self, data: bytes, endian: str):
        self.data = data
        self.pos = 0
        self.e = endian

    def element(self) -> tuple[int, bytes]:
        """Next (type, payload), consuming padding to the 8-byte boundary."""
        if self.pos + 8 > len(self.data):
            raise MatFileError("unexpected end of data (truncated MAT-file)")
        (first,) = struct.unpack_from(self.e + "I", self.data, self.pos)
        if first >> 16:  # small data element: type and size share 4 bytes, data in the next 4
            mtype, nbytes = first & 0xFFFF, first >> 16
            payload = self.data[self.pos + 4 : self.pos + 4 + nbytes]
            self.pos += 8
            return mtype, payload
        mtype, nbytes = struct.unpack_from(self.e + "II", self.data, self.pos)
        start = self.pos + 8
        if start + nbytes > len(self.data):
            raise MatFileError("unexpected end of data (truncated MAT-file)")
        payload = self.data[start : start + nbytes]
        self.pos = start + (nbytes if mtype == MI_COMPRESSED else (nbytes + 7) // 8 * 8)
        return mtype, payload

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _numbers(mtype: int, payload: bytes, endian: str) -> list:
    code = _NUMERIC.get(mtype)
    if code is None:
        raise MatFileError(f"unsupported numeric data type {mtype}")
    count = len(payload) // struct.calcsize(code)
    return list(struct.unpack(f"{endian}{count}{code}", payload[: count * struct.calcsize(code)]))


def _matrix(payload: bytes, endian: str) -> tuple[str, Any]:
    """Decode one miMATRIX payload into (name, value)."""
    if not payload:
        return "", []
    r = _Reader(payload, endian)
    _, flags = r.element()
    cls = struct.unpack(endian + "I", flags[:4])[0] & 0xFF
    if flags and struct.unpack(endian + "I", flags[:4])[0] & 0x0800:
        raise MatFileError("complex arrays are not supported")
    _, dims_raw = r.element()
    dims = _numbers(MI_INT32, dims_raw, endian)
    count = 1
    for d in dims:
        count *= d
    _, name_raw = r.element()
    name = name_raw.decode("ascii")
    if cls == MX_CHAR:
        mtype, data = r.element() if not r.at_end() else (MI_UTF8, b"")
        if mtype in (MI_UTF8, MI_INT8, MI_UINT8):
            chars = data.decode("utf-8")
        elif mtype in (MI_UTF16, MI_UINT16):
            chars = data.decode("utf-16-le" if endian == "<" else "utf-16-be")
        else:
            chars = "".join(map(chr, _numbers(mtype, data, endian)))
        rows = dims[0] if dims else 0
        if rows <= 1:
            return name, chars
        # column-major: row i is chars[i], chars[i + rows], ...
        return name, ["".join(chars[i::rows]) for i in range(rows)]
    if cls == MX_CELL:
        return name, [_matrix(r.element()[1], endian)[1] for _ in range(count)]
    if cls == MX_STRUCT:
        _, length_raw = r.element()
        length = _numbers(MI_INT32, length_raw, endian)[0]
        _, names_raw = r.element()
        fields = [
            names_raw[i : i + length].split(b"\0", 1)[0].decode("ascii")
            for i in range(0, len(names_raw), length)
        ]
        return name, [{f: _matrix(r.element()[1], endian)[1] for f in fields} for _ in range(count)]
    if MX_DOUBLE <= cls <= 15:
        values = _numbers(*r.element(), endian) if count else []
        return name, values[0] if len(values) == 1 else values
    raise MatFileError(f"unsupported array class {cls} (sparse or object) in variable {name!r}")


def loads(data: bytes) -> dict[str, Any]:
    """Variables of a MAT-file: numbers, strings, lists (cells, vectors) and lists of dicts."""
    if len(data) < 128:
        raise MatFileError("not a MAT-file: shorter than the 128-byte header")
    if data[:10] != b"MATLAB 5.0":
        if data[:19] == b"MATLAB 7.3 MAT-file":
            raise MatFileError("MAT-file v7.3 (HDF5) is not supported")
        raise MatFileError("not a MATLAB 5 MAT-file (header does not start with 'MATLAB 5.0')")
    marker = data[126:128]
    if marker == b"IM":
        endian = "<"
    elif marker == b"MI":
        endian = ">"
    else:
        raise MatFileError("not a MAT-file: bad endian indicator")
    out: dict[str, Any] = {}
    r = _Reader(data[128:], endian)
    while not r.at_end():
        mtype, payload = r.element()
        if mtype == MI_COMPRESSED:
            try:
                payload = zlib.decompress(payload)
            except zlib.error as e:
                raise MatFileError(f"corrupt compressed element: {e}") from None
            mtype, payload = _Reader(payload, endian).element()
        if mtype != MI_MATRIX:
            continue
        name, value = _matrix(payload, endian)
        out[name] = value
    return out


def load(path: str | Path) -> dict[str, Any]:
    return loads(Path(path).read_bytes())


# --- writing (what the synthetic devkit needs) ------------------------------------------------
def _elem(mtype: int, payload: bytes) -> bytes:
    if len(payload) <= 4 and mtype != MI_MATRIX:
        return struct.pack("<HH", mtype, len(payload)) + payload.ljust(4, b"\0")
    pad = (-len(payload)) % 8
    return struct.pack("<II", mtype, len(payload)) + payload + b"\0" * pad


def _header(cls: int, dims: tuple[int, ...], name: str) -> bytes:
    return (
        _elem(MI_UINT32, struct.pack("<II", cls, 0))
        + _elem(MI_INT32, struct.pack(f"<{len(dims)}i", *dims))
        + _elem(MI_INT8, name.encode("ascii"))
    )


def _encode(value: Any, name: str = "") -> bytes:
    if isinstance(value, str):
        body = _header(MX_CHAR, (1 if value else 0, len(value)), name)
        body += _elem(MI_UINT16, value.encode("utf-16-le"))
    elif isinstance(value, bool | int | float):
        body = _header(MX_DOUBLE, (1, 1), name) + _elem(MI_DOUBLE, struct.pack("<d", value))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        fields = list(value[0])
        length = max(len(f) for f in fields) + 1
        body = _header(MX_STRUCT, (len(value), 1), name)
        body += _elem(MI_INT32, struct.pack("<i", length))
        body += _elem(MI_INT8, b"".join(f.encode("ascii").ljust(length, b"\0") for f in fields))
        for item in value:
            body += b"".join(_encode(item[f]) for f in fields)
    elif isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        dims = (1, len(value)) if value else (0, 0)
        body = _header(MX_DOUBLE, dims, name)
        body += _elem(MI_DOUBLE, struct.pack(f"<{len(value)}d", *value))
    else:
        raise TypeError(f"cannot write {type(value).__name__} to a MAT-file")
    return _elem(MI_MATRIX, body)


def dumps(variables: dict[str, Any], compress: bool = True) -> bytes:
    """A little-endian MATLAB 5 MAT-file holding ``variables`` (compressed like MATLAB 7)."""
    text = b"MATLAB 5.0 MAT-file, written by zeus-nb data_scripts/matv5.py"
    out = text.ljust(116, b" ") + b"\0" * 8 + struct.pack("<H", 0x0100) + b"IM"
    for name, value in variables.items():
        element = _encode(value, name)
        if compress:
            packed = zlib.compress(element)
            element = struct.pack("<II", MI_COMPRESSED, len(packed)) + packed
        out += element
    return out
