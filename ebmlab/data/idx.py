"""Reader and writer for the IDX format of the MNIST family (MNIST, KMNIST, EMNIST).

An IDX file is: two zero bytes, one dtype code byte, one byte giving the number of
dimensions n, n big-endian uint32 sizes, then the array in C order, big-endian.
Files may be gzip-compressed (detected by the gzip magic bytes, not by the name).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

_CODES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    raw = Path(path).read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        raw = gzip.decompress(raw)
    return raw


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (plain or gzip) into a numpy array in native byte order."""
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _CODES:
        raise ValueError(f"{path}: not an IDX file (bad magic {raw[:4]!r})")
    dtype = _CODES[raw[2]]
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    count = int(np.prod(shape)) if ndim else 1
    expected = header + count * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{path}: IDX header says shape {shape} ({expected} bytes) but file has {len(raw)}"
        )
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path: str | Path, arr: np.ndarray, compress: bool | None = None) -> None:
    """Write ``arr`` as IDX; gzip when ``compress`` (default: when the name ends in .gz)."""
    path = Path(path)
    arr = np.asarray(arr)
    code = None
    for c, dt in _CODES.items():
        if dt.kind == arr.dtype.kind and dt.itemsize == arr.dtype.itemsize:
            code = c
            break
    if code is None:
        raise ValueError(f"dtype {arr.dtype} has no IDX code")
    body = arr.astype(_CODES[code], copy=False).tobytes(order="C")
    data = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + body
    if compress is None:
        compress = path.name.endswith(".gz")
    path.write_bytes(gzip.compress(data) if compress else data)
