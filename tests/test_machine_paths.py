"""Nothing committed names a path of the machine it was made on (issue 45, item 7): records,
claims and docs name files by their path in the repository (or beside it, ``../shared/``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# an absolute home / work / temp path (spelled in pieces so this file does not match itself)
MACHINE_ROOTS = ("work", "home", "tmp", "root", "Users")
MACHINE_PATH = re.compile(r"(?<![\w.\-/~])/(?:" + "|".join(MACHINE_ROOTS) + r")/[\w.\-]")
ALLOWED: dict[str, str] = {}  # repo path -> why (an example a user types); none needed today


def machine_paths(text: str) -> list[str]:
    """The lines of ``text`` naming an absolute home, work or temp path."""
    return [line.strip()[:160] for line in text.splitlines() if MACHINE_PATH.search(line)]


def _tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in out.decode().split("\0") if p]


def test_pattern_finds_machine_paths_and_ignores_relative_ones():
    home = "/" + "home" + "/me/ebmlab/outputs/x"
    assert machine_paths(f"checkpoint is {home} (step 3)")
    assert machine_paths("    cwd: /" + "work" + "/main")
    assert not machine_paths("outputs/multirun/tmp/work/x and ../shared/papers/a.txt and ~/tmp/x")


def test_no_tracked_file_names_a_machine_path():
    found = []
    for rel in _tracked():
        path = REPO / rel
        if rel in ALLOWED or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue  # binary
        for line in machine_paths(data.decode("utf-8", errors="replace")):
            found.append(f"{rel}: {line}")
    assert not found, "absolute machine paths in tracked files:\n" + "\n".join(found[:40])


def test_records_and_status_store_project_relative_paths(tmp_path, monkeypatch):
    """The writers: a failed job's status.json (rundir.write_status) and a run's files copied
    into records/ (records.copy_file, for archive and park) name paths relative to the
    project that holds records/ and outputs/."""
    from ebmlab.runs import records
    from ebmlab.utils import rundir

    project = tmp_path / "clone"
    run_dir = project / "outputs" / "multirun" / "grbm" / "fig1_gmm" / "paper" / "seed=0"
    monkeypatch.chdir(project.parent)  # started from elsewhere: the run's own project still wins
    rundir.write_status(run_dir, 1, f"diverged; the last good checkpoint is {run_dir}/ckpt")
    hydra_yaml = run_dir / ".hydra" / "hydra.yaml"
    hydra_yaml.parent.mkdir(parents=True)
    hydra_yaml.write_text(f"    cwd: {project}\n    - path: {project}/conf\n")
    for name in ("status.json", ".hydra/hydra.yaml"):
        out = project / "records" / run_dir.relative_to(project / "outputs") / name
        assert records.copy_file(run_dir / name, out)
        text = out.read_text()
        assert not machine_paths(text) and str(tmp_path) not in text, text
    rel = "outputs/multirun/grbm/fig1_gmm/paper/seed=0"
    assert (
        f"checkpoint is {rel}/ckpt" in (project / "records" / rel[8:] / "status.json").read_text()
    )
    assert "cwd: .\n" in out.read_text() and "- path: conf\n" in out.read_text()
