"""The committed record of finished runs, and verdicts carried from an earlier report.

Run directories live under ``outputs/`` and are not committed: a fresh clone, or a machine
that lost its disk, has none of them. ``outputs/records/`` keeps, for every finished run a
report judged, the few files a verdict is computed from (``results.json``, the resolved
config, the command-line overrides, and the metric log that curves and first crossings are
read from), mirroring the run's path, plus the benchmark JSONs the claims read. It is small
and committed, so ``python -m ebmlab.report reproduce`` gives the same verdicts on any
checkout. A live run directory wins over its record of the same path.

A report rewritten into a file (``--into docs/reproduction.md``) may hold verdicts whose runs
are in neither place, made before records existed. Such a claim, which the new runs leave
"not run", keeps its earlier row, marked with the date of the report it came from
(:func:`carry`), instead of silently losing a measured result.

A run longer than a machine's life (a preemptible node, a workspace reset between sessions)
can be *parked*: :func:`park_runs` keeps each unfinished run's last checkpoint, config,
metric log and progress under ``records/parked/``, at the run's own path, and
:func:`unpark_runs` puts them back on a new machine, where the run's command resumes it.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path

from ebmlab.report.runs import bench_rows, collect, collect_failed, collect_unfinished
from ebmlab.report.spec import sweep_dir
from ebmlab.utils.relpaths import project_relative
from ebmlab.utils.workspace import Workspace

RECORD_FILES = ("results.json", "run_config.json", ".hydra/overrides.yaml", "metrics.jsonl")
VERDICT = re.compile(r"\*\*(reproduced|not reproduced|not run)\*\*")
DEVIATIONS = "Runs with settings other than the paper's"
CARRIED_RUNS = "The carried verdicts' runs, as the report of {} listed them:"
CARRIED_RUNS_START = CARRIED_RUNS.split("{")[0]
CARRIED_HEAD = re.compile(r"carried over from the report of (\S+ \S+) \(marked\), made on (.*?): ")
CARRIED = re.compile(r" \(carried over from the report of ([^;]+); its runs are not on record\)")


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
    return Path(root) / "records"


def parked_root(root: Path) -> Path:
    return records_root(root) / "parked"


def _copy(src: Path, out: Path) -> bool:
    """Copy ``src`` to ``out`` atomically unless ``out`` already holds the same bytes; True if
    it was copied. Into the records, the files that name paths (:data:`PATH_FILES`) name them
    relative to the project (the folder holding ``outputs/``), not as this machine's."""
    data = src.read_bytes()
    records = next((p for p in out.parents if p.name == "records"), None)
    if src.name in PATH_FILES and records is not None:
        data = project_relative(data.decode(), records.parent.resolve().parent).encode()
    if out.exists() and out.read_bytes() == data:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return True


def archive_runs(root: Path, experiment: str, scale: str) -> int:
    """Copy the record files of every finished run of ``experiment`` at ``scale`` into
    ``<root>/records/``, at the run's own relative path, and the ``status.json`` of every job
    that failed (its message is a result too). Returns how many runs were new or changed."""
    root = Path(root)
    here = sweep_dir(root, experiment, scale)
    finished = sorted(here.rglob("results.json"))
    failed = [r["run_dir"] / "status.json" for r in collect_failed(here)]
    changed = 0
    for res in finished + failed:
        dest = records_root(root) / res.parent.relative_to(root)
        for name in (*RECORD_FILES, "status.json"):
            src = res.parent / name
            if src.exists() and _copy(src, dest / name):
                changed += name == res.name
    return changed


def _live_then_recorded(root: Path, experiment: str, scale: str, read, also_live=()) -> list:
    """``read`` (collect or collect_failed) of the live sweep directory, then of its record,
    leaving out the recorded runs whose directory is here (read, or named in ``also_live``:
    a live run wins over its record)."""
    here = sweep_dir(root, experiment, scale)
    kept_at = sweep_dir(records_root(root), experiment, scale)
    live = read(here)
    names = {r["run_dir"].relative_to(here) for r in live} | set(also_live)
    return live + [r for r in read(kept_at) if r["run_dir"].relative_to(kept_at) not in names]


def failed_recorded(root: Path, experiment: str, scale: str) -> list[dict]:
    """The failed jobs of ``experiment``: live, then recorded ones not on this machine (a job
    that has since started again here, finished or not, wins)."""
    here = sweep_dir(root, experiment, scale)
    started = [p.parent.relative_to(here) for p in here.rglob("run_config.json")]
    return _live_then_recorded(root, experiment, scale, collect_failed, started)


def bench_name(bench: str, scale: str) -> str:
    """The stem of a benchmark's JSON at ``scale`` (``make bench-ratio-matching SCALE=smoke``
    writes ``ratio_matching_smoke.json``)."""
    return bench if scale == "paper" else f"{bench}_{scale}"


def archive_bench(root: Path, name: str) -> None:
    """Keep a benchmark's JSON (``<root>/bench/<name>.json``) in the records."""
    src = Path(root) / "bench" / f"{name}.json"
    if src.exists():
        _copy(src, records_root(root) / "bench" / src.name)


def collect_recorded(root: Path, experiment: str, scale: str) -> list[dict]:
    """The finished runs of ``experiment``: the live run directories, then the records of
    runs that are not (or no longer) on this machine."""
    return _live_then_recorded(root, experiment, scale, collect)


def bench_recorded(root: Path, name: str) -> list[dict]:
    """A benchmark's rows, from its live JSON, else from its record."""
    live = Path(root) / "bench" / f"{name}.json"
    return bench_rows(live if live.exists() else records_root(root) / "bench" / live.name)


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row.strip().strip("|"))


@dataclass
class Earlier:
    """What an assembled report said about one paper: its claim rows (id -> table row), when
    it was generated, on what hardware, and its list of runs with non-paper settings."""

    rows: dict[str, str] = field(default_factory=dict)
    when: str = "an unknown date"
    hardware: str = ""
    deviations: list[str] = field(default_factory=list)


def earlier_report(text: str, title: str) -> Earlier:
    """The section ``## Reproduction: <title>`` of an assembled report, parsed."""
    start = text.find(f"## Reproduction: {title}\n")
    if start < 0:
        return Earlier()
    end = text.find("\n## Reproduction: ", start + 1)
    lines = text[start : end if end > 0 else len(text)].splitlines()
    out = Earlier()
    carried_block = False
    for i, line in enumerate(lines):
        head = re.match(r"Scale: .*?Hardware: (.*?)\. Generated (\S+ \S+)", line)
        if head:
            out.hardware, out.when = head.groups()
            again = CARRIED_HEAD.search(line)  # a report that itself carried verdicts
            if again:
                out.when, out.hardware = again.groups()
        block = line.startswith(CARRIED_RUNS_START)
        if block or (line.startswith(DEVIATIONS) and not carried_block):
            carried_block |= block
            out.deviations = list(
                takewhile(lambda ln: not ln.startswith(("|", "The ")), lines[i + 2 :])
            )
        m = re.match(r"\| `([^`]+)`:", line)
        if m:
            out.rows[m.group(1)] = line
    while out.deviations and not out.deviations[-1].strip():
        out.deviations.pop()
    return out


def verdict_of(row: str) -> str | None:
    cells = _cells(row)
    m = VERDICT.match(cells[5].strip()) if len(cells) == 8 else None
    return m.group(1) if m else None


def carry(row: str, when: str) -> str:
    """An earlier report's row for a claim the present runs leave unjudged, its verdict
    cell marked with the date of the report it was measured for (kept if already marked)."""
    cells = _cells(row)
    if not CARRIED.search(cells[5]):
        cells[5] = cells[5].rstrip() + (
            f" (carried over from the report of {when}; its runs are not on record) "
        )
    return "|" + "|".join(cells) + "|"


def fewer_runs(row: str, earlier_row: str) -> list[tuple[int, int]]:
    """(runs now, runs then) for each value of ``row`` measured on fewer runs than in the
    carried row of an earlier report it replaces: a partial re-run (seed 0 of three) replaces
    a carried row whole, so the others' seeds drop out until they are run again."""
    then_cells, now_cells = _cells(earlier_row), _cells(row)
    if len(then_cells) != 8 or len(now_cells) != 8 or not CARRIED.search(then_cells[5]):
        return []
    then, now = (
        [int(n) for n in re.findall(r"\(n=(\d+)\)", cells[3])] for cells in (then_cells, now_cells)
    )
    if len(then) != len(now):
        return []
    return [(a, b) for a, b in zip(now, then) if a < b]


def _step(run_dir: Path) -> int:
    """The step of a run directory's last checkpoint (from ``progress.json``); -1 if none."""
    prog = run_dir / "progress.json"
    if not (prog.exists() and (run_dir / "checkpoints" / "last.pt").exists()):
        return -1
    return int(json.loads(prog.read_text())["step"])


def _finished(root: Path, rel: Path) -> bool:
    """Whether the run at ``rel`` finished, here or in the records."""
    return any((r / rel / "results.json").exists() for r in (root, records_root(root)))


def _copy_run(src: Path, dest: Path, tries: int = 10) -> None:
    """Copy a run's :data:`PARK_FILES`; a checkpoint replaced while it was copied (its file
    and checksum from different saves) is copied again."""
    for _ in range(tries):
        for name in PARK_FILES:
            if (src / name).exists():
                _copy(src / name, dest / name)
        if Workspace(dest).verify(dest / "checkpoints" / "last.pt") is None:
            return
        time.sleep(1.0)
    raise RuntimeError(f"{src}: its checkpoint kept changing while it was copied; try again")


def park_runs(root: Path) -> list[Path]:
    """Copy the resumable state (:data:`PARK_FILES`) of every unfinished run under
    ``<root>/runs`` and ``<root>/multirun`` that has a checkpoint into ``<root>/records/parked/``
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


def collect_parked(root: Path, experiment: str, scale: str) -> list[dict]:
    """The parked runs of ``experiment`` that are not on this machine, as unfinished runs
    (:func:`collect_unfinished`) whose ``unfinished`` says where they stopped and how to go on."""
    root = Path(root)
    here, kept = sweep_dir(root, experiment, scale), sweep_dir(parked_root(root), experiment, scale)
    runs = []
    for r in collect_unfinished(kept):
        rel = r["run_dir"].relative_to(kept)
        live = here / rel
        if (live / "run_config.json").exists() or _finished(root, live.relative_to(root)):
            continue
        p = json.loads((r["run_dir"] / "progress.json").read_text())
        r["unfinished"] = (
            f"parked at step {p['step']:,} of {p['n_steps']:,} ({p['updated']}): "
            "`python -m ebmlab.report unpark`, then its command resumes it"
        )
        runs.append(r)
    return runs
