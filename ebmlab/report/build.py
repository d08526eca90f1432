"""Every table and figure of one experiment, from its sweep directory (and the records of runs
no longer on this machine) and its ``report:`` node."""

from __future__ import annotations

from pathlib import Path

from ebmlab.report import spec
from ebmlab.report.figures import FIGURES
from ebmlab.report.grouping import select, sort_key
from ebmlab.report.tables import write_table
from ebmlab.runs.records import collect_recorded
from ebmlab.runs.rundirs import key_value


def _runs(item: dict, experiment: str, scale: str, root: Path) -> list[dict]:
    runs = []
    for e in spec.experiments_of(item, experiment):
        runs += collect_recorded(root, e, scale)
    return select(runs, item.get("where"))


def _parts(item: dict, runs: list[dict]) -> list[tuple[str, list[dict]]]:
    """("", runs), or one (value, runs) per value of ``item['per']``."""
    per = item.get("per")
    if not per:
        return [("", runs)]
    values = sorted({key_value(r, per) for r in runs}, key=sort_key)
    return [(v, [r for r in runs if key_value(r, per) == v]) for v in values]


def build_report(experiment: str, scale: str, root: Path = Path("outputs")) -> list[Path]:
    """Write the experiment's tables and figures under ``<root>/tables/<experiment>/<scale>/``.
    Raises SystemExit when a table that is not ``optional`` has no finished run."""
    report = spec.report_spec(experiment)
    out = spec.out_dir(root, experiment, scale)
    written: list[Path] = []
    for item in report["tables"]:
        runs = _runs(item, experiment, scale, root)
        if not runs:
            if item.get("optional"):
                continue
            dirs = [
                str(spec.sweep_dir(root, e, scale)) for e in spec.experiments_of(item, experiment)
            ]
            raise SystemExit(f"no results.json under {', '.join(dirs)}")
        for value, part in _parts(item, runs):
            stem = "_".join(x for x in (item.get("name", "table"), value) if x)
            md, paths = write_table(
                part,
                out / stem,
                list(item["group"]),
                list(item["metrics"]),
                spec.load_paper(item),
                spec.title(item, scale, value),
                list(item.get("curve") or []),
                list(item.get("x") or ["step", "seconds"]),
            )
            print(md)
            written += paths
    for item in report["figures"]:
        runs = _runs(item, experiment, scale, root)
        if not runs:
            continue
        for value, part in _parts(item, runs):
            stem = "_".join(x for x in (item.get("name", item["kind"]), value) if x)
            out.mkdir(parents=True, exist_ok=True)
            make = FIGURES[item["kind"]]
            written += make(
                part,
                out / f"{stem}.png",
                spec.title(item, scale, value),
                **dict(item.get("options") or {}),
            )
    for path in written:
        print(f"written: {path}")
    return written
