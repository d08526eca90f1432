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
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path

from ebmlab.report.runs import bench_rows, collect, collect_failed
from ebmlab.report.spec import sweep_dir

RECORD_FILES = ("results.json", "run_config.json", ".hydra/overrides.yaml", "metrics.jsonl")
VERDICT = re.compile(r"\*\*(reproduced|not reproduced|not run)\*\*")
DEVIATIONS = "Runs with settings other than the paper's"
CARRIED_RUNS = "The carried verdicts' runs, as the report of {} listed them:"
CARRIED_RUNS_START = CARRIED_RUNS.split("{")[0]
CARRIED_HEAD = re.compile(r"carried over from the report of (\S+ \S+) \(marked\), made on (.*?): ")
CARRIED = re.compile(r" \(carried over from the report of ([^;]+); its runs are not on record\)")


def records_root(root: Path) -> Path:
    return Path(root) / "records"


def _copy(src: Path, out: Path) -> bool:
    """Copy ``src`` to ``out`` atomically unless ``out`` already holds the same bytes; True if
    it was copied."""
    if out.exists() and out.read_bytes() == src.read_bytes():
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    shutil.copyfile(src, tmp)
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
