"""Restricted unpickling for public data files stored as Python pickles.

Only the classes listed in ``ALLOWED`` can be reconstructed; anything else (``os.system``,
``builtins.eval``, arbitrary ``__reduce__`` targets, ...) raises :class:`ForbiddenPickleClass`
before it is imported. The allow-list covers the Planetoid files (``ind.<name>.{x,tx,allx,
graph,y,ty,ally}``): scipy CSR matrices of numpy arrays and a ``defaultdict`` of lists, pickled
under Python 2 (hence ``encoding="latin1"`` and the ``__builtin__`` / ``numpy.core`` names).
"""

from __future__ import annotations

import collections
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp


class ForbiddenPickleClass(pickle.UnpicklingError):
    """The pickle asked for a global outside the allow-list."""


def _numpy_reconstruct() -> Any:
    try:  # numpy >= 2
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct
    return _reconstruct


def _numpy_scalar() -> Any:
    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import scalar
    return scalar


def _latin1_encode(obj: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as Python 3 protocol-2 pickles use it for bytes, latin-1 only."""
    if encoding.lower().replace("_", "-") not in ("latin1", "latin-1"):
        raise ForbiddenPickleClass(f"refusing _codecs.encode with encoding {encoding!r}")
    return obj.encode("latin1")


_BUILTINS = {
    "list": list,
    "dict": dict,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "int": int,
    "float": float,
    "complex": complex,
    "bool": bool,
    "str": str,
    "bytes": bytes,
    "bytearray": bytearray,
    "long": int,  # Python 2 names
    "unicode": str,
}

# (module, name) as written in the pickle -> the object it stands for (resolved here, never by
# importing whatever module the file names).
ALLOWED: dict[tuple[str, str], Any] = {
    **{("builtins", k): v for k, v in _BUILTINS.items()},
    **{("__builtin__", k): v for k, v in _BUILTINS.items()},
    ("_codecs", "encode"): _latin1_encode,
    ("collections", "defaultdict"): collections.defaultdict,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy.core.multiarray", "scalar"): _numpy_scalar(),
    ("numpy._core.multiarray", "scalar"): _numpy_scalar(),
    **{
        (mod, cls): getattr(sp, cls)
        for cls, mods in {
            "csr_matrix": ("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse"),
            "csc_matrix": ("scipy.sparse.csc", "scipy.sparse._csc", "scipy.sparse"),
            "coo_matrix": ("scipy.sparse.coo", "scipy.sparse._coo", "scipy.sparse"),
            "lil_matrix": ("scipy.sparse.lil", "scipy.sparse._lil", "scipy.sparse"),
        }.items()
        for mod in mods
    },
}


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` only resolves names in :data:`ALLOWED`."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise ForbiddenPickleClass(
                f"refusing to unpickle forbidden global '{module}.{name}': only builtin "
                "containers, numpy arrays/dtypes and scipy.sparse matrices are allowed"
            ) from None


def safe_loads(data: bytes, encoding: str = "latin1") -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler` (``latin1`` for Python 2 pickles)."""
    return RestrictedUnpickler(io.BytesIO(data), encoding=encoding).load()


def safe_load_pickle(path: str | Path, encoding: str = "latin1") -> Any:
    """Load a pickle file allowing only builtin containers, numpy and scipy.sparse classes."""
    with open(path, "rb") as f:
        return RestrictedUnpickler(f, encoding=encoding).load()
