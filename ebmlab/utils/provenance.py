"""Which code made a run: the git commit of the checkout, so a record can be traced to it."""

from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# `git archive` writes the commit into this file (export-subst in .gitattributes)
ARCHIVAL = Path("ebmlab") / "_archival.txt"
WATCHED = ("ebmlab", "conf")  # edits here make a checkout "dirty"; run outputs do not


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_version(root: Path = PACKAGE_ROOT) -> str | None:
    """The commit the code at ``root`` comes from, with ``+dirty`` when ``ebmlab/`` or
    ``conf/`` differ from it (a file edited, or a new one git does not ignore); for an export
    made by ``git archive`` (no ``.git``), the commit written into ``ebmlab/_archival.txt``;
    otherwise None."""
    sha = _git(root, "rev-parse", "HEAD")
    if sha is not None and _git(root, "rev-parse", "--show-toplevel") == str(root.resolve()):
        changed = _git(root, "status", "--porcelain", "--", *WATCHED)
        return sha + ("+dirty" if changed else "")
    archival = root / ARCHIVAL
    text = archival.read_text().strip() if archival.exists() else ""
    return text if text and not text.startswith("$Format") else None
