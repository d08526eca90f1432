"""Tables and comparison figures from run directories (never from re-typed numbers).

    python -m ebmlab.report outputs/multirun/ising_learning_smoke \
        --group sampler learner.sampler_steps --metrics log_rmse time_per_iter \
        --curve log_rmse --out outputs/tables/ising_learning_smoke

Reads every ``results.json`` below the sweep directory (with the job's
overrides from ``.hydra/overrides.yaml``), averages over seeds (mean +/- std),
puts the paper's values beside ours when ``--paper FILE.yaml`` is given, and
writes ``<out>.md`` (markdown), ``<out>.csv`` and ``<out>_<curve>.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from ebmlab.utils.logging import read_metrics


def _overrides(run_dir: Path) -> dict[str, str]:
    f = run_dir / ".hydra" / "overrides.yaml"
    out = {}
    if f.exists():
        for item in yaml.safe_load(f.read_text()) or []:
            if "=" in item:
                k, v = item.split("=", 1)
                out[k.lstrip("+~")] = v
    return out


def collect(sweep_dir: Path) -> list[dict]:
    """One record per finished run: run_dir, overrides, choices, metrics, meta."""
    runs = []
    for res in sorted(Path(sweep_dir).rglob("results.json")):
        data = json.loads(res.read_text())
        run_dir = res.parent
        ov = _overrides(run_dir)
        runs.append(
            {
                "run_dir": run_dir,
                "overrides": ov,
                "choices": data.get("choices", {}),
                "metrics": data["metrics"],
                "scale": data.get("scale"),
                "hardware": data.get("hardware"),
                "seed": data.get("seed"),
            }
        )
    return runs


def _key_value(run: dict, key: str) -> str:
    if key in run["overrides"]:
        return run["overrides"][key]
    if key in run["choices"]:
        return str(run["choices"][key])
    return "-"


def group_runs(runs: list[dict], keys: list[str]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        groups[tuple(_key_value(r, k) for k in keys)].append(r)
    return dict(sorted(groups.items(), key=lambda kv: [_sort_key(v) for v in kv[0]]))


def _sort_key(v: str):
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def _fmt(values: list[float]) -> str:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "n/a"
    m = float(np.mean(vals))
    if len(vals) == 1:
        return f"{m:.4g}"
    return f"{m:.4g} ± {float(np.std(vals, ddof=1)):.2g}"


def markdown_table(
    runs: list[dict],
    keys: list[str],
    metrics: list[str],
    paper: dict | None = None,
    title: str = "",
) -> tuple[str, list[list[str]]]:
    groups = group_runs(runs, keys)
    scales = sorted({str(r["scale"]) for r in runs})
    hardware = sorted({str(r["hardware"]) for r in runs})
    header = list(keys) + ["seeds"] + metrics
    paper = paper or {}
    paper_cols = sorted({m for v in paper.values() for m in v}) if paper else []
    header += [f"paper {m}" for m in paper_cols]
    rows = []
    for gkey, members in groups.items():
        row = list(gkey) + [str(len(members))]
        row += [_fmt([r["metrics"].get(m) for r in members]) for m in metrics]
        label = ", ".join(gkey)
        pv = (paper.get(label) or paper.get(gkey[0]) or {}) if paper else {}
        row += [str(pv.get(m, "")) for m in paper_cols]
        rows.append(row)
    lines = []
    if title:
        lines.append(f"### {title}\n")
    lines.append(
        f"Scale: **{', '.join(scales)}**. Hardware: {', '.join(hardware)}. "
        f"Runs: {len(runs)}; mean ± std over seeds where there are several.\n"
    )
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n", [header] + rows


def curve_figure(
    runs: list[dict], keys: list[str], metric: str, xs=("step", "seconds"), title: str = ""
):
    """Mean curve of ``metric`` per group (over seeds), against each x in ``xs``."""
    from ebmlab.utils.plotting import side_by_side

    panels = []
    for x in xs:
        series = {}
        for gkey, members in group_runs(runs, keys).items():
            curves = []
            for r in members:
                rows = [m for m in read_metrics(r["run_dir"] / "metrics.jsonl") if metric in m]
                if rows and x in rows[0]:
                    curves.append(
                        (
                            np.array([m[x] for m in rows], float),
                            np.array([m[metric] for m in rows], float),
                        )
                    )
            if not curves:
                continue
            n = min(len(c[0]) for c in curves)
            series[", ".join(gkey)] = (
                np.mean([c[0][:n] for c in curves], 0),
                np.mean([c[1][:n] for c in curves], 0),
            )
        panels.append((f"{metric} vs {x}", series, x, metric))
    return side_by_side(panels, title=title)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", type=Path, nargs="+")
    ap.add_argument("--group", nargs="+", default=["sampler"])
    ap.add_argument("--metrics", nargs="+", required=True)
    ap.add_argument("--curve", nargs="*", default=[])
    ap.add_argument("--x", nargs="+", default=["step", "seconds"])
    ap.add_argument("--paper", type=Path, default=None, help="YAML: group label -> metric -> value")
    ap.add_argument("--title", default="")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    runs = [r for d in a.sweep_dir for r in collect(d)]
    if not runs:
        raise SystemExit(f"no results.json under {', '.join(map(str, a.sweep_dir))}")
    paper = yaml.safe_load(a.paper.read_text()) if a.paper else None
    md, rows = markdown_table(runs, a.group, a.metrics, paper, a.title)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".md").write_text(md)
    with open(a.out.with_suffix(".csv"), "w", newline="") as f:
        csv.writer(f).writerows(rows)
    for metric in a.curve:
        import matplotlib.pyplot as plt

        fig = curve_figure(runs, a.group, metric, a.x, a.title)
        fig.savefig(a.out.parent / f"{a.out.name}_{metric}.png", dpi=120, bbox_inches="tight")
        plt.close(fig)
    print(md)
    print(f"written: {a.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
