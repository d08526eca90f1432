"""Generated-data caches (Ising samples, trained target RBMs, ground truth, feature nets):
written atomically with a SHA-256 sidecar; a cache whose bytes no longer match, or that
cannot be read, is reported in one line, deleted and rebuilt by the caller.

``fresh=true`` rebuilds the caches a run reads, too: the runner sets ``EBMLAB_REBUILD_CACHE``
and each cache file is then rebuilt once in that process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from ebmlab.utils.workspace import Workspace, _digest, atomic_torch_save, atomic_write_text

REBUILD_ENV = "EBMLAB_REBUILD_CACHE"
_rebuilt: set[Path] = set()  # caches already rebuilt by this process under fresh=true


def save_cached(obj, path: Path) -> None:
    path = Path(path)
    atomic_torch_save(obj, path)
    atomic_write_text(Workspace._sidecar(path), _digest(path))


def load_cached(path: Path, map_location="cpu"):
    """The cached object, or None when absent or corrupt (then the file is removed so the
    caller rebuilds it). A cache written before checksums existed is accepted if it loads."""
    path = Path(path)
    if not path.is_file():
        return None
    side = Workspace._sidecar(path)
    if os.environ.get(REBUILD_ENV) == "1" and path.resolve() not in _rebuilt:
        _rebuilt.add(path.resolve())
        print(f"ebmlab: rebuilding cache {path} (fresh=true)", file=sys.stderr)
        path.unlink(missing_ok=True)
        side.unlink(missing_ok=True)
        return None
    problem = None
    if side.exists() and _digest(path) != side.read_text().strip():
        problem = "its checksum does not match (changed or truncated)"
    else:
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unpickling failure is corruption
            problem = f"it cannot be read ({type(e).__name__})"
    print(f"ebmlab: cache {path} is corrupt: {problem}; rebuilding it", file=sys.stderr)
    path.unlink(missing_ok=True)
    side.unlink(missing_ok=True)
    return None
