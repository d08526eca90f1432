"""A resumable run directory (drqv2-style): atomic checkpoints, resume on restart."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import torch

from ebmlab.errors import CheckpointError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, write, mode: str) -> None:
    """Write via a temp file in the same folder + fsync + rename; the file gets the normal
    permissions (0666 & ~umask, like ``open``), and a failed write leaves no temp file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_torch_save(obj, path: Path) -> None:
    """Atomically write ``obj`` with ``torch.save``."""
    _atomic_write(path, lambda f: torch.save(obj, f), "wb")


def atomic_write_text(path: Path, text: str) -> None:
    """Atomically write ``text``."""
    _atomic_write(path, lambda f: f.write(text), "w")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Workspace:
    """Checkpoints of one run: ``<run_dir>/checkpoints/<name>.pt``, each with a SHA-256
    sidecar (``<name>.pt.sha256``) verified on load. Saving ``name`` keeps the previous
    good file as ``<name>.prev.pt``; a corrupt or truncated checkpoint is never loaded:
    the previous one is used (said in one line), and if none is good the run stops with
    a :class:`~ebmlab.errors.CheckpointError` naming the file."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"

    @property
    def last(self) -> Path:
        return self.ckpt_dir / "last.pt"

    def path(self, name: str) -> Path:
        return self.ckpt_dir / f"{name}.pt"

    def has_checkpoint(self) -> bool:
        return self.last.exists()

    @staticmethod
    def _sidecar(path: Path) -> Path:
        return path.with_name(path.name + ".sha256")

    def verify(self, path: Path) -> str | None:
        """None when ``path`` matches its checksum, else what is wrong."""
        side = self._sidecar(path)
        if not side.exists():
            return "its checksum file is missing"
        if _digest(path) != side.read_text().strip():
            return "its checksum does not match (changed or truncated)"
        return None

    def save(self, state: dict, name: str = "last") -> Path:
        path, prev = self.path(name), self.path(f"{name}.prev")
        if path.exists() and self.verify(path) is None:
            os.replace(self._sidecar(path), self._sidecar(prev))
            os.replace(path, prev)
        atomic_torch_save(state, path)
        atomic_write_text(self._sidecar(path), _digest(path))
        return path

    def load(self, name: str = "last", map_location="cpu") -> dict | None:
        path, prev = self.path(name), self.path(f"{name}.prev")
        candidates = [p for p in (path, prev) if p.exists()]
        if not candidates:
            return None
        problems = []
        for p in candidates:
            bad = self.verify(p)
            if bad is None:
                try:
                    state = torch.load(p, map_location=map_location, weights_only=True)
                except Exception as e:  # noqa: BLE001 - any unpickling failure is corruption
                    bad = f"it cannot be read ({type(e).__name__})"
                else:
                    if problems:
                        print(f"ebmlab: {problems[-1]}; resuming from {p} instead", file=sys.stderr)
                    return state
            problems.append(f"checkpoint {p} is not usable: {bad}")
        raise CheckpointError(
            "; ".join(problems) + "; pass fresh=true to discard this run directory and start afresh"
        )
