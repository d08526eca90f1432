"""The committed record of finished runs.

Run directories live under ``outputs/`` and are not committed: a fresh clone, or a machine
that lost its disk, has none of them. ``records/`` (at the project's top, beside ``outputs/``)
keeps, for every finished run a report judged, the few files a verdict is computed from
(``results.json``, the resolved config, the command-line overrides, and the metric log that
curves and first crossings are read from), mirroring the run's path, plus the benchmark
JSONs the claims read. It is small and committed, so ``python -m ebmlab.report reproduce``
gives the same verdicts on any checkout. A live run directory wins over its record of the same path.

A verdict is only ever computed from runs that are here or on record: a claim whose runs are
in neither place is "not run". ``reproduce --records-only`` (and ``--into``, which writes the
committed docs) reads the records alone, so what it writes depends on the commit, not on the
machine.

Unfinished runs parked between machines are :mod:`ebmlab.runs.park`'s.
"""

from __future__ import annotations

from pathlib import Path

from ebmlab.runs.layout import run_dirs
from ebmlab.runs.rundirs import bench_rows, collect, collect_failed, unique_runs
from ebmlab.utils.relpaths import project_relative

RECORD_FILES = ("results.json", "run_config.json", ".hydra/overrides.yaml", "metrics.jsonl")


PATH_FILES = ("hydra.yaml", "status.json")  # may name absolute paths of the machine


def records_root(root: Path) -> Path:
    """The committed records of the runs under ``root`` (``outputs``): ``records/`` beside it,
    at the top of the project that holds both."""
    return Path(root).parent / "records"


def copy_file(src: Path, out: Path) -> bool:
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


def archive_runs(root: Path, experiment: str, scale: str) -> int:
    """Copy the record files of every finished run of ``experiment`` at ``scale`` (sweep jobs
    and single runs) into the records (:func:`records_root`), at the run's own relative path,
    and the ``status.json`` of every job that failed (its message is a result too). Returns how
    many runs were new or changed."""
    root = Path(root)
    changed = 0
    for here in run_dirs(root, experiment, scale):
        finished = sorted(here.rglob("results.json"))
        failed = [r["run_dir"] / "status.json" for r in collect_failed(here)]
        for res in finished + failed:
            dest = records_root(root) / res.parent.relative_to(root)
            for name in (*RECORD_FILES, "status.json"):
                src = res.parent / name
                if src.exists() and copy_file(src, dest / name):
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
    recorded = [r for d in run_dirs(kept, experiment, scale) for r in read(d)]
    if not live_too:
        return unique_runs(recorded)
    live = [r for d in run_dirs(root, experiment, scale) for r in read(d)]
    names = {r["run_dir"].relative_to(root) for r in live} | set(also_live)
    return unique_runs(live + [r for r in recorded if r["run_dir"].relative_to(kept) not in names])


def failed_recorded(root: Path, experiment: str, scale: str, live_too: bool = True) -> list[dict]:
    """The failed jobs of ``experiment``: live, then recorded ones not on this machine (a job
    that has since started again here, finished or not, wins); the recorded ones alone with
    ``live_too`` False."""
    started = (
        [
            p.parent.relative_to(root)
            for here in run_dirs(root, experiment, scale)
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
        copy_file(src, records_root(root) / "bench" / src.name)


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
