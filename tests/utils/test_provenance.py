"""A run names the commit its code came from, from a checkout or from a `git archive` export."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ebmlab.utils.provenance import ARCHIVAL, code_version

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(path: Path) -> str:
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    (path / "ebmlab").mkdir(parents=True)
    (path / "ebmlab" / "a.py").write_text("x = 1\n")
    (path / ARCHIVAL).write_text("$Format:%H$\n")
    (path / ".gitattributes").write_text(f"{ARCHIVAL.as_posix()} export-subst\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "one")
    return git("rev-parse", "HEAD")


@needs_git
def test_a_checkout_gives_its_commit_and_says_when_code_was_edited(tmp_path):
    sha = _repo(tmp_path)
    assert code_version(tmp_path) == sha
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "results.json").write_text("{}")  # run outputs are not code
    assert code_version(tmp_path) == sha
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "new.yaml").write_text("a: 1\n")  # a config not yet committed
    assert code_version(tmp_path) == sha + "+dirty"
    (tmp_path / "conf" / "new.yaml").unlink()
    (tmp_path / "ebmlab" / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path) == sha + "+dirty"


@needs_git
def test_a_git_archive_export_carries_its_commit(tmp_path):
    sha = _repo(tmp_path / "repo")
    export = tmp_path / "export"
    export.mkdir()
    tar = subprocess.run(
        ["git", "-C", str(tmp_path / "repo"), "archive", "HEAD"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(export)], input=tar, check=True)
    assert code_version(export) == sha


def test_without_git_or_a_written_archival_file_the_version_is_unknown(tmp_path):
    (tmp_path / "ebmlab").mkdir()
    assert code_version(tmp_path) is None
    (tmp_path / ARCHIVAL).write_text("$Format:%H$\n")  # copied, not exported: not substituted
    assert code_version(tmp_path) is None
