"""Parked unfinished runs: a run longer than a machine's life.

A run longer than a machine's life (a preemptible node, a workspace reset between sessions)
can be *parked*: :func:`park_runs` keeps each unfinished run's last checkpoint, config,
metric log and progress under ``records/parked/``, at the run's own path, and
:func:`unpark_runs` puts them back on a new machine, where the run's command resumes it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ebmlab.runs.layout import RUN_ROOTS, sweep_dir
from ebmlab.runs.records import copy_file, records_root
from ebmlab.runs.rundirs import collect_unfinished
from ebmlab.utils.jsonio import field, read_json
from ebmlab.utils.workspace import Workspace

# progress first and the checkpoint before the metric log: a copy taken while the run writes
# then holds a checkpoint at least as new as its progress and a log at least as long as the
# checkpoint's offset (resume truncates the log to it)
PARK_FILES = (
    "progress.json",
    "checkpoints/last.pt",
    "checkpoints/last.pt.sha256",
    "run_config.json",
    ".hydra/config.yaml",
    ".hydra/hydra.yaml",
    ".hydra/overrides.yaml",
    "metrics.jsonl",
)


def parked_root(root: Path) -> Path:
    return records_root(root) / "parked"


def _step(run_dir: Path) -> int:
    """The step of a run directory's last checkpoint (from ``progress.json``); -1 if none."""
    prog = run_dir / "progress.json"
    if not (prog.exists() and Workspace(run_dir).has_checkpoint()):
        return -1
    return int(field(read_json(prog, "the run's progress"), "step", prog, "the run's progress"))


def _finished(root: Path, rel: Path) -> bool:
    """Whether the run at ``rel`` finished, here or in the records."""
    return any((r / rel / "results.json").exists() for r in (root, records_root(root)))


def _copy_run(src: Path, dest: Path, tries: int = 10) -> None:
    """Copy a run's :data:`PARK_FILES`; a checkpoint replaced while it was copied (its file
    and checksum from different saves) is copied again. The copy holds the source's newest
    good checkpoint as a plain ``checkpoints/last.pt`` with its ``last.pt.sha256`` (whatever
    the source's layout: :class:`~ebmlab.utils.workspace.Workspace` reads both)."""
    for _ in range(tries):
        current = Workspace(src).current()
        for name in PARK_FILES:
            source = src / name
            if name == "checkpoints/last.pt" and current is not None:
                source = current
            elif name == "checkpoints/last.pt.sha256" and current is not None:
                source = Workspace._sidecar(current)
            if source.exists():
                copy_file(source, dest / name)
        if Workspace(dest).verify(dest / "checkpoints" / "last.pt") is None:
            return
        time.sleep(1.0)
    raise RuntimeError(f"{src}: its checkpoint kept changing while it was copied; try again")


def park_runs(root: Path) -> list[Path]:
    """Copy the resumable state (:data:`PARK_FILES`) of every unfinished run under
    ``<root>/runs`` and ``<root>/multirun`` that has a checkpoint into ``records/parked/``
    at the run's relative path, and drop the parked copies of runs that have since finished.
    Returns the runs parked (relative to ``root``)."""
    root = Path(root)
    parked = []
    for sub in RUN_ROOTS:
        for run in collect_unfinished(root / sub):
            rel = run["run_dir"].relative_to(root)
            if _step(root / rel) < 0:
                continue
            _copy_run(root / rel, parked_root(root) / rel)
            parked.append(rel)
    for cfg in sorted(parked_root(root).rglob("run_config.json")):
        rel = cfg.parent.relative_to(parked_root(root))
        if _finished(root, rel):
            shutil.rmtree(cfg.parent)
    return parked


def unpark_runs(root: Path) -> list[Path]:
    """Put every parked run back at its path under ``root`` where that run has not finished
    and holds no checkpoint as far along (a run resumed elsewhere and parked earlier is never
    rolled back). Its command then resumes it. Returns the runs restored (relative)."""
    root = Path(root)
    restored = []
    for cfg in sorted(parked_root(root).rglob("run_config.json")):
        src = cfg.parent
        rel = src.relative_to(parked_root(root))
        if _finished(root, rel) or _step(src) <= _step(root / rel):
            continue
        _copy_run(src, root / rel)
        restored.append(rel)
    return restored


def collect_parked(root: Path, experiment: str, scale: str, live_too: bool = True) -> list[dict]:
    """The parked runs of ``experiment`` that are not on this machine (with ``live_too`` False:
    that have not finished on record, whatever is here), as unfinished runs
    (:func:`collect_unfinished`) whose ``unfinished`` says where they stopped and how to go on."""
    root = Path(root)
    here, kept = sweep_dir(root, experiment, scale), sweep_dir(parked_root(root), experiment, scale)
    runs = []
    for r in collect_unfinished(kept):
        rel = r["run_dir"].relative_to(kept)
        live = here / rel
        if live_too and (live / "run_config.json").exists():
            continue
        if (records_root(root) / live.relative_to(root) / "results.json").exists() or (
            live_too and (live / "results.json").exists()
        ):
            continue
        p = read_json(r["run_dir"] / "progress.json", "the run's progress")
        r["unfinished"] = (
            f"parked at step {p['step']:,} of {p['n_steps']:,} ({p['updated']}): "
            "`python -m ebmlab.report unpark`, then its command resumes it"
        )
        runs.append(r)
    return runs
