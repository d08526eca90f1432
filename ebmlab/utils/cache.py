"""Generated-data caches (Ising samples, trained target RBMs, ground truth, feature nets):
written atomically with a SHA-256 sidecar; a cache whose bytes no longer match, or that
cannot be read, is reported in one line, deleted and rebuilt by the caller."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from ebmlab.utils.workspace import Workspace, _digest, atomic_torch_save, atomic_write_text


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
