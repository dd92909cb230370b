"""Reading IDX files, the format of MNIST and Fashion-MNIST (``*-idx3-ubyte[.gz]``).

An IDX file is a big-endian header (two zero bytes, a type code, the number of dimensions,
then each dimension as a 4-byte int) followed by the values in C order. Only unsigned
bytes (type ``0x08``, what (Fashion-)MNIST stores) are read. Gzipped files are read as is.
"""

from __future__ import annotations

import gzip
import math
import os
import struct
from pathlib import Path

import torch

from attnkit.i18n import _

__all__ = ["IDXFormatError", "read_idx"]

_UNSIGNED_BYTE = 0x08


class IDXFormatError(ValueError):
    """The file is not a well-formed IDX file of unsigned bytes."""


def read_idx(path: str | os.PathLike) -> torch.Tensor:
    """The values of an IDX file of unsigned bytes as a uint8 tensor of the file's shape.

    ``path`` may be gzipped (by its ``.gz`` suffix). Raises ``IDXFormatError`` naming the
    file for a bad magic number, a type other than unsigned byte, or a size that does not
    match the header; ``FileNotFoundError`` when it is missing.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        message = _("{path} is not an IDX file (its first bytes are {head!r})")
        raise IDXFormatError(message.format(path=path, head=data[:4]))
    type_code, ndim = data[2], data[3]
    if type_code != _UNSIGNED_BYTE:
        message = _("{path}: IDX type 0x{type_code:02x}, only 0x08 (ubyte) is read")
        raise IDXFormatError(message.format(path=path, type_code=type_code))
    header = 4 + 4 * ndim
    if len(data) < header:
        message = _("{path}: header of {ndim} dimensions is cut short")
        raise IDXFormatError(message.format(path=path, ndim=ndim))
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = header + math.prod(shape)
    if len(data) != expected:
        message = _("{path}: shape {shape} needs {expected} bytes, the file has {size}")
        raise IDXFormatError(
            message.format(path=path, shape=tuple(shape), expected=expected, size=len(data))
        )
    values = torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8)
    return values.reshape(shape)
