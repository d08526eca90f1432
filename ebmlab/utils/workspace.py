"""A resumable run directory (drqv2-style): atomic checkpoints, resume on restart.

Checkpoint layout (``<run_dir>/checkpoints/``), for each checkpoint name (``last``, ``best``, ...):

- ``<name>.<generation>.pt``: one file per save, never rewritten in place, with its SHA-256
  beside it in ``<name>.<generation>.pt.sha256``. A generation is complete once its checksum
  file exists (both are written to a temporary file first and renamed into place).
- ``<name>.pt``: a symbolic link to the newest complete generation, updated with one atomic
  rename (the commit point of a save). Readers that open ``checkpoints/last.pt`` see a
  complete checkpoint at every instant.
- The previous complete generation is kept; older ones are deleted after the link moved.

So at every instant of a save at least one complete, verifiable checkpoint is on disk, and a
kill at any point of the sequence leaves the previous one findable. Directories written by
an older ebmlab (``last.pt`` a regular file with ``last.pt.sha256``, and ``last.prev.pt``)
still load; their files are removed after the first save in the new layout.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Atomically write ``data``."""
    _atomic_write(path, lambda f: f.write(data), "wb")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Workspace:
    """Checkpoints of one run (layout in the module docstring). ``save`` writes a new
    generation and moves ``<name>.pt`` to it; ``load`` returns the newest checkpoint that
    matches its checksum: a corrupt or truncated one is never loaded (the previous one is
    used, said in one line), and if none is good the run stops with a
    :class:`~ebmlab.errors.CheckpointError` naming the files. Loads go to ``device`` (the
    run's device) unless the call names another."""

    def __init__(self, run_dir: Path, device=None):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.device = device
        self._good: dict[str, Path] = {}  # per name: the generation this process saved or loaded

    @property
    def last(self) -> Path:
        return self.ckpt_dir / "last.pt"

    def path(self, name: str) -> Path:
        return self.ckpt_dir / f"{name}.pt"

    def has_checkpoint(self, name: str = "last") -> bool:
        """Whether any checkpoint file of ``name`` is on disk (usable or not)."""
        return bool(self._candidates(name))

    @staticmethod
    def _sidecar(path: Path) -> Path:
        return path.with_name(path.name + ".sha256")

    def _generations(self, name: str) -> list[tuple[int, Path]]:
        """(generation, file) of ``<name>.<generation>.pt``, newest first."""
        pattern = re.compile(re.escape(name) + r"\.(\d+)\.pt")
        found = []
        if self.ckpt_dir.is_dir():
            for p in self.ckpt_dir.iterdir():
                m = pattern.fullmatch(p.name)
                if m:
                    found.append((int(m.group(1)), p))
        return sorted(found, reverse=True)

    def _candidates(self, name: str) -> list[Path]:
        """Files that may hold checkpoint ``name``, in the order to try them: what ``<name>.pt``
        points to, the other generations newest first, then an older ebmlab's files."""
        link, out = self.path(name), []
        if link.is_symlink():
            out.append(self.ckpt_dir / os.readlink(link))
        elif link.exists():  # an older layout (or an unparked run): a regular file, own sidecar
            out.append(link)
        # a generation without its checksum file is a save that was interrupted: not a checkpoint
        out += [p for _, p in self._generations(name) if self._sidecar(p).exists()]
        out.append(self.path(f"{name}.prev"))
        seen, unique = set(), []
        for p in out:
            if p.name not in seen and p.is_file():
                seen.add(p.name)
                unique.append(p)
        return unique

    def current(self, name: str = "last") -> Path | None:
        """The file ``load(name)`` would read (the newest that matches its checksum), or None."""
        for p in self._candidates(name):
            if self.verify(p) is None:
                return p
        return None

    def verify(self, path: Path) -> str | None:
        """None when ``path`` matches its checksum, else what is wrong. A link is checked
        against the checksum of the file it points to."""
        path = Path(path)
        if path.is_symlink():
            path = path.parent / os.readlink(path)
        if not path.is_file():
            return "it is missing"
        side = self._sidecar(path)
        if not side.exists():
            return "its checksum file is missing (its save was interrupted)"
        try:
            ok = _digest(path) == side.read_text().strip()
        except OSError as e:
            return f"it cannot be read ({e})"
        return None if ok else "its checksum does not match (changed or truncated)"

    def save(self, state: dict, name: str = "last") -> Path:
        """Write ``state`` as a new generation of ``name`` and point ``<name>.pt`` at it.
        Returns the generation's file."""
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        gens = self._generations(name)
        gen = gens[0][0] + 1 if gens else 1
        previous = self._good.get(name) or self.current(name)
        link = self.path(name)
        if previous == link and not link.is_symlink():  # keep a regular <name>.pt as a generation
            previous = self._adopt(link, gen)
            gen += 1
        path = self.ckpt_dir / f"{name}.{gen:08d}.pt"
        atomic_torch_save(state, path)
        atomic_write_text(self._sidecar(path), _digest(path))  # the generation is complete
        tmp_link = self.ckpt_dir / f".{name}.pt.{os.getpid()}.link.tmp"
        if tmp_link.is_symlink() or tmp_link.exists():
            os.unlink(tmp_link)
        os.symlink(path.name, tmp_link)
        os.replace(tmp_link, link)  # the commit point: one atomic rename
        _fsync_dir(self.ckpt_dir)
        self._good[name] = path
        self._prune(name, keep={path.name, previous.name if previous is not None else ""})
        return path

    def _adopt(self, path: Path, gen: int) -> Path:
        """Make the regular checkpoint ``path`` (an older layout's ``last.pt``) generation
        ``gen`` (a hard link, else a copy, then its checksum), so it stays as the fallback."""
        adopted = path.with_name(f"{path.name[: -len('.pt')]}.{gen:08d}.pt")
        adopted.unlink(missing_ok=True)
        try:
            os.link(path, adopted)
        except OSError:
            shutil.copyfile(path, adopted)
        atomic_write_text(self._sidecar(adopted), self._sidecar(path).read_text())
        return adopted

    def _prune(self, name: str, keep: set[str]) -> None:
        """Delete the generations of ``name`` other than ``keep`` (checksum file after its
        checkpoint, so no checksum is left without its file), an older layout's files, and
        temporary files of interrupted saves."""
        for _, p in self._generations(name):
            if p.name not in keep:
                p.unlink(missing_ok=True)
                self._sidecar(p).unlink(missing_ok=True)
        prev = self.path(f"{name}.prev")
        if prev.name not in keep and self.path(name).name not in keep:  # no fallback of its own
            prev.unlink(missing_ok=True)
            self._sidecar(prev).unlink(missing_ok=True)
        self._sidecar(self.path(name)).unlink(missing_ok=True)  # a regular <name>.pt's sidecar
        for tmp in (*self.ckpt_dir.glob(f"{name}.*.tmp"), *self.ckpt_dir.glob(f".{name}.*.tmp")):
            tmp.unlink(missing_ok=True)

    def load(self, name: str = "last", device=None, *, map_location=None) -> dict | None:
        """The newest good checkpoint of ``name`` (tensors on ``device``, else the workspace's
        device, else the CPU), None if there is none at all."""
        where = map_location if map_location is not None else device
        if where is None:
            where = self.device if self.device is not None else "cpu"
        candidates = self._candidates(name)
        if not candidates:
            return None
        link = self.path(name)
        pointed = self.ckpt_dir / os.readlink(link) if link.is_symlink() else None
        problems = []
        for p in candidates:
            bad = self.verify(p)
            if bad is None:
                try:
                    state = torch.load(p, map_location=where, weights_only=True)
                except Exception as e:  # noqa: BLE001 - any unpickling failure is corruption
                    bad = f"it cannot be read ({type(e).__name__})"
                else:
                    if problems:
                        print(f"ebmlab: {problems[-1]}; resuming from {p} instead", file=sys.stderr)
                    self._good[name] = p
                    return state
            shown = f"{link} is not usable ({p.name})" if p == pointed else f"{p} is not usable"
            problems.append(f"checkpoint {shown}: {bad}")
        raise CheckpointError(
            "; ".join(problems) + "; pass fresh=true to discard this run directory and start afresh"
        )
