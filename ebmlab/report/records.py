"""The committed record of finished runs, and parked unfinished runs.

Run directories live under ``outputs/`` and are not committed: a fresh clone, or a machine
that lost its disk, has none of them. ``records/`` (at the project's top, beside ``outputs/``)
keeps, for every finished run a
report judged, the few files a verdict is computed from (``results.json``, the resolved
config, the command-line overrides, and the metric log that curves and first crossings are
read from), mirroring the run's path, plus the benchmark JSONs the claims read. It is small
and committed, so ``python -m ebmlab.report reproduce`` gives the same verdicts on any
checkout. A live run directory wins over its record of the same path.

A verdict is only ever computed from runs that are here or on record: a claim whose runs are
in neither place is "not run". ``reproduce --records-only`` (and ``--into``, which writes the
committed docs) reads the records alone, so what it writes depends on the commit, not on the
machine.

A run longer than a machine's life (a preemptible node, a workspace reset between sessions)
can be *parked*: :func:`park_runs` keeps each unfinished run's last checkpoint, config,
metric log and progress under ``records/parked/``, at the run's own path, and
:func:`unpark_runs` puts them back on a new machine, where the run's command resumes it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ebmlab.report.runs import (
    bench_rows,
    collect,
    collect_failed,
    collect_unfinished,
    unique_runs,
)
from ebmlab.report.spec import sweep_dir
from ebmlab.utils.jsonio import field, read_json
from ebmlab.utils.relpaths import project_relative
from ebmlab.utils.workspace import Workspace

RECORD_FILES = ("results.json", "run_config.json", ".hydra/overrides.yaml", "metrics.jsonl")
DEVIATIONS = "Runs with settings other than the paper's"


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
RUN_ROOTS = ("runs", "multirun")
PATH_FILES = ("hydra.yaml", "status.json")  # may name absolute paths of the machine


def records_root(root: Path) -> Path:
    """The committed records of the runs under ``root`` (``outputs``): ``records/`` beside it,
    at the top of the project that holds both."""
    return Path(root).parent / "records"


def parked_root(root: Path) -> Path:
    return records_root(root) / "parked"


def _copy(src: Path, out: Path) -> bool:
    """Copy ``src`` to ``out`` atomically unless ``out`` already holds the same bytes; True if
    it was copied. Into the records, the files that name paths (:data:`PATH_FILES`) name them
    relative to the project (the folder holding ``records/`` and ``outputs/``), not as this
    machine's."""
    data = src.read_bytes()
    records = next((p for p in out.parents if p.name == "records"), None)
    if src.name in PATH_FILES and records is not None:
        data = project_relative(data.decode(), records.parent.resolve()).encode()
    if out.exists() and out.read_bytes() == data:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return True


def _run_dirs(root: Path, experiment: str, scale: str) -> list[Path]:
    """Where the runs of ``experiment`` at ``scale`` live below ``root``: its sweeps
    (``multirun/<experiment>/<scale>``) and its single runs (``runs/<experiment>/<scale>``)."""
    sweeps = sweep_dir(root, experiment, scale)
    return [sweeps, Path(root) / "runs" / sweeps.relative_to(Path(root) / "multirun")]


def archive_runs(root: Path, experiment: str, scale: str) -> int:
    """Copy the record files of every finished run of ``experiment`` at ``scale`` (sweep jobs
    and single runs) into the records (:func:`records_root`), at the run's own relative path,
    and the ``status.json`` of every job that failed (its message is a result too). Returns how
    many runs were new or changed."""
    root = Path(root)
    changed = 0
    for here in _run_dirs(root, experiment, scale):
        finished = sorted(here.rglob("results.json"))
        failed = [r["run_dir"] / "status.json" for r in collect_failed(here)]
        for res in finished + failed:
            dest = records_root(root) / res.parent.relative_to(root)
            for name in (*RECORD_FILES, "status.json"):
                src = res.parent / name
                if src.exists() and _copy(src, dest / name):
                    changed += name == res.name
    return changed


def _live_then_recorded(
    root: Path, experiment: str, scale: str, read, also_live=(), live_too: bool = True
) -> list:
    """``read`` (collect or collect_failed) of the live run directories (sweeps, then single
    runs), then of their record, leaving out the recorded runs whose directory is here (read,
    or named in ``also_live``, relative to ``root``: a live run wins over its record); with
    ``live_too`` False, of the record alone. Each run once (:func:`unique_runs`: keyed by its
    config hash, wherever it lives)."""
    root = Path(root)
    kept = records_root(root)
    recorded = [r for d in _run_dirs(kept, experiment, scale) for r in read(d)]
    if not live_too:
        return unique_runs(recorded)
    live = [r for d in _run_dirs(root, experiment, scale) for r in read(d)]
    names = {r["run_dir"].relative_to(root) for r in live} | set(also_live)
    return unique_runs(live + [r for r in recorded if r["run_dir"].relative_to(kept) not in names])


def failed_recorded(root: Path, experiment: str, scale: str, live_too: bool = True) -> list[dict]:
    """The failed jobs of ``experiment``: live, then recorded ones not on this machine (a job
    that has since started again here, finished or not, wins); the recorded ones alone with
    ``live_too`` False."""
    started = (
        [
            p.parent.relative_to(root)
            for here in _run_dirs(root, experiment, scale)
            for p in here.rglob("run_config.json")
        ]
        if live_too
        else []
    )
    return _live_then_recorded(root, experiment, scale, collect_failed, started, live_too)


def bench_name(bench: str, scale: str) -> str:
    """The stem of a benchmark's JSON at ``scale`` (``make bench-ratio-matching SCALE=smoke``
    writes ``ratio_matching_smoke.json``)."""
    return bench if scale == "paper" else f"{bench}_{scale}"


def archive_bench(root: Path, name: str) -> None:
    """Keep a benchmark's JSON (``<root>/bench/<name>.json``) in the records."""
    src = Path(root) / "bench" / f"{name}.json"
    if src.exists():
        _copy(src, records_root(root) / "bench" / src.name)


def collect_recorded(root: Path, experiment: str, scale: str, live_too: bool = True) -> list[dict]:
    """The finished runs of ``experiment``: the live run directories, then the records of
    runs that are not (or no longer) on this machine; the records alone with ``live_too``
    False."""
    return _live_then_recorded(root, experiment, scale, collect, live_too=live_too)


def bench_recorded(root: Path, name: str, live_too: bool = True) -> list[dict]:
    """A benchmark's rows, from its live JSON, else (or with ``live_too`` False) its record."""
    live = Path(root) / "bench" / f"{name}.json"
    use_live = live_too and live.exists()
    return bench_rows(live if use_live else records_root(root) / "bench" / live.name)


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
                _copy(source, dest / name)
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
