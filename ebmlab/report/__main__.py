"""Command line of ebmlab.report.

python -m ebmlab.report table EXPERIMENT [--scale paper|smoke] [--root outputs] [--wandb]
python -m ebmlab.report runs SWEEP_DIR... --group KEY... --metrics M... --out PATH
python -m ebmlab.report figure KIND SWEEP_DIR... --out PNG [--title T] [--set key=value]
python -m ebmlab.report inputs EXPERIMENT [--scale S] [--root outputs]
python -m ebmlab.report reproduce PAPER|all [--scale S] [--run [--dry-run] [--only E...]]
    [--records-only] [--into docs/reproduction.md]
python -m ebmlab.report park | unpark [--root outputs]

The report reads and judges; what it runs and keeps on disk (``reproduce --run``: the missing
runs of the claims; ``park`` / ``unpark``; the records ``reproduce`` archives into) is the
work of :mod:`ebmlab.runs`, which these commands call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ebmlab.report import spec
from ebmlab.report.build import build_report
from ebmlab.report.figures import FIGURES
from ebmlab.report.reproduce import reproduce
from ebmlab.report.tables import write_table
from ebmlab.runs.rundirs import collect, key_value, unique_runs
from ebmlab.utils.jsonio import CorruptFileError


def _table(a) -> None:
    written = build_report(a.experiment, a.scale, a.root)
    if a.wandb:
        from ebmlab.report.wandb_export import log_report

        out = spec.out_dir(a.root, a.experiment, a.scale)
        print(
            f"W&B ({a.wandb_mode}): {log_report(a.experiment, a.scale, written, out, a.wandb_mode)}"
        )


def _runs_table(a) -> None:
    runs = unique_runs([r for d in a.sweep_dir for r in collect(d)])  # each run once
    if not runs:
        raise SystemExit(f"no results.json under {', '.join(map(str, a.sweep_dir))}")
    paper = yaml.safe_load(a.paper.read_text()) if a.paper else None
    md, paths = write_table(runs, a.out, a.group, a.metrics, paper, a.title, a.curve, a.x)
    print(md)
    print(f"written: {paths[0]}")


def _figure(a) -> None:
    runs = unique_runs([r for d in a.sweep_dir for r in collect(d)])  # each run once
    options = {}
    for kv in a.set:
        k, v = kv.split("=", 1)
        options[k] = yaml.safe_load(v)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for path in FIGURES[a.kind](runs, a.out, a.title, **options):
        print(f"written: {path}")


def _inputs(a) -> None:
    """Print ``++NAME={value: 'run dir', ...}`` for each ``report.inputs`` entry: the finished
    run of ``experiment`` matching ``where``, one per value of ``key`` (e.g. per dataset)."""
    out = []
    for name, src in spec.report_spec(a.experiment)["inputs"].items():
        found = {}
        for r in collect(spec.sweep_dir(a.root, src["experiment"], a.scale)):
            if all(key_value(r, k) == str(v) for k, v in (src.get("where") or {}).items()):
                found.setdefault(key_value(r, src["key"]), str(r["run_dir"]))
        if not found:
            raise SystemExit(
                f"{a.experiment} needs finished runs of {src['experiment']} ({a.scale} scale, "
                f"{src.get('where') or {}}): run that experiment first"
            )
        items = ",".join(f"{k}:'{v}'" for k, v in sorted(found.items()))
        out.append(f"++{name}={{{items}}}")
    print(" ".join(out))


def _reproduce(a) -> None:
    code = reproduce(
        a.paper, a.scale, a.root, a.out, a.run, a.only, a.args, a.dry_run, a.into, a.records_only
    )
    if code:
        raise SystemExit(code)


def _park(a) -> None:
    from ebmlab.runs.park import park_runs, parked_root, unpark_runs

    moved = park_runs(a.root) if a.cmd == "park" else unpark_runs(a.root)
    where = parked_root(a.root)
    verb = f"parked in {where}" if a.cmd == "park" else f"restored from {where}"
    for rel in moved:
        print(f"{verb}: {rel}")
    print(f"{len(moved)} run(s) {verb}" + (" (commit it to keep them)" if a.cmd == "park" else ""))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ebmlab.report", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table", help="every table and figure of an experiment's sweep")
    t.add_argument("experiment", help="e.g. dlp/fig3_ising_sampling")
    t.add_argument("--scale", choices=spec.SCALES, default="paper")
    t.add_argument("--root", type=Path, default=Path("outputs"))
    t.add_argument("--wandb", action="store_true", help="also log the tables and figures to W&B")
    t.add_argument("--wandb-mode", choices=("offline", "online"), default="offline")
    t.set_defaults(fn=_table)
    r = sub.add_parser("runs", help="an ad-hoc table of any sweep directories")
    r.add_argument("sweep_dir", type=Path, nargs="+")
    r.add_argument("--group", nargs="+", default=["sampler"])
    r.add_argument("--metrics", nargs="+", required=True)
    r.add_argument("--curve", nargs="*", default=[])
    r.add_argument("--x", nargs="+", default=["step", "seconds"])
    r.add_argument("--paper", type=Path, default=None, help="YAML: group label -> metric -> value")
    r.add_argument("--title", default="")
    r.add_argument("--out", type=Path, required=True, help="output path without suffix")
    r.set_defaults(fn=_runs_table)
    f = sub.add_parser("figure", help="one figure of any sweep directories")
    f.add_argument("kind", choices=sorted(FIGURES))
    f.add_argument("sweep_dir", type=Path, nargs="+")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--title", default="")
    f.add_argument("--set", nargs="*", default=[], help="figure options, e.g. rows=[learner]")
    f.set_defaults(fn=_figure)
    d = sub.add_parser("inputs", help="the override naming an experiment's input runs")
    d.add_argument("experiment", help="e.g. acs/fig5_ebm_mixing (its report.inputs)")
    d.add_argument("--scale", choices=spec.SCALES, default="paper")
    d.add_argument("--root", type=Path, default=Path("outputs"))
    d.set_defaults(fn=_inputs)
    c = sub.add_parser("reproduce", help="judge a paper's claims (conf/claims/) against our runs")
    c.add_argument("paper", help="dlp, acs, ab, rmwggis, grbm, or all")
    c.add_argument("--scale", choices=spec.SCALES, default="paper")
    c.add_argument("--root", type=Path, default=Path("outputs"))
    c.add_argument("--out", type=Path, default=Path("outputs/reproduction"))
    c.add_argument("--run", action="store_true", help="run (or resume) the claims' runs first")
    c.add_argument("--only", nargs="*", default=[], help="with --run: only these experiments")
    c.add_argument(
        "--dry-run",
        action="store_true",
        help="with --run: print the sweeps of the missing runs, run none",
    )
    c.add_argument("--args", nargs="*", default=[], help="extra overrides for every run")
    c.add_argument(
        "--into",
        type=Path,
        default=None,
        help="with `all`: also write the docs index (e.g. docs/reproduction.md: headline claims "
        "per paper) and one page per paper beside it (docs/reproduction/<paper>.md), judged on "
        "the committed records alone",
    )
    c.add_argument(
        "--records-only",
        action="store_true",
        help="judge on the committed records (records/ beside <root>) alone (ignore live run "
        "directories; archive nothing): what a clean checkout gives",
    )
    c.set_defaults(fn=_reproduce)
    for name, what in (
        ("park", "keep every unfinished run's checkpoint in records/parked/"),
        ("unpark", "put the parked runs back, for their commands to resume"),
    ):
        k = sub.add_parser(name, help=what)
        k.add_argument("--root", type=Path, default=Path("outputs"))
        k.set_defaults(fn=_park)
    a = ap.parse_args(argv)
    try:
        a.fn(a)
    except CorruptFileError as e:  # a damaged run file: one line, exit 3 (as the runner)
        print(f"ebmlab.report: {e}", file=sys.stderr)
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
