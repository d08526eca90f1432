"""Paths written into files that are kept (status, records) name places relative to the
project (the directory a run is started from, which holds ``outputs/``), never the machine's
absolute ones, so a record reads the same on any clone."""

from __future__ import annotations

import re
from pathlib import Path


def project_relative(text: str, project: Path | str | None = None) -> str:
    """``text`` with each absolute path inside ``project`` (default: the current directory)
    written relative to it (``<project>/outputs/x`` -> ``outputs/x``; the project itself
    -> ``.``). Paths elsewhere are left as they are."""
    root = Path(project if project is not None else Path.cwd()).resolve().as_posix().rstrip("/")
    if not root:  # the file-system root: every path is inside it, none is made relative
        return text
    text = re.sub(re.escape(root) + "/", "", text)
    return re.sub(re.escape(root) + r"(?![\w.\-/])", ".", text)


def project_of(run_dir: Path) -> Path:
    """The project a run directory belongs to: the folder holding its ``outputs/`` ancestor,
    else the current directory (a run placed elsewhere with ``hydra.run.dir=``)."""
    run_dir = Path(run_dir).resolve()
    return next((p.parent for p in run_dir.parents if p.name == "outputs"), Path.cwd())
