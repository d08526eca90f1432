"""A resumable run directory (drqv2-style): atomic checkpoints, resume on restart."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch


def atomic_torch_save(obj, path: Path) -> None:
    """Write ``obj`` to ``path`` via a temp file in the same folder + fsync + rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Workspace:
    """Checkpoints of one run: ``<run_dir>/checkpoints/{last,best}.pt``."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"

    @property
    def last(self) -> Path:
        return self.ckpt_dir / "last.pt"

    def has_checkpoint(self) -> bool:
        return self.last.exists()

    def save(self, state: dict, name: str = "last") -> Path:
        path = self.ckpt_dir / f"{name}.pt"
        atomic_torch_save(state, path)
        return path

    def load(self, name: str = "last", map_location="cpu") -> dict | None:
        path = self.ckpt_dir / f"{name}.pt"
        if not path.exists():
            return None
        return torch.load(path, map_location=map_location, weights_only=True)
