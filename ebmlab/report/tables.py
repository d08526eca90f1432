"""Markdown / CSV tables and mean curves over seeds, from collected runs."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ebmlab.report.grouping import cpu_share_note, group_runs, row_keys
from ebmlab.runs.rundirs import MISSING, logged_rows


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
    """Markdown table (one row per group of ``keys``, mean ± std over seeds) with a header
    naming the scale and hardware, and the paper's values beside ours. Returns (md, rows)."""
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
        f"Runs: {len(runs)}; mean ± std over seeds where there are several."
        + (f" {note}" if (note := cpu_share_note(runs)) else "")
        + "\n"
    )
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n", [header] + rows


def series_label(keys: list[str], values: tuple[str, ...]) -> str:
    """A curve's legend entry: its group's values, numbers named by their key (a bare "5"
    says nothing), values the group lacks left out."""

    def part(key: str, value: str) -> str:
        try:
            float(value)
        except ValueError:
            return value
        return f"{key.split('.')[-1]}={value}"

    return ", ".join(part(k, v) for k, v in zip(keys, values) if v != MISSING)


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
                rows = logged_rows(r, metric)
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
            series[series_label(keys, gkey)] = (
                np.mean([c[0][:n] for c in curves], 0),
                np.mean([c[1][:n] for c in curves], 0),
            )
        panels.append((f"{metric} vs {x}", series, x, metric))
    return side_by_side(panels, title=title)


def write_table(
    runs: list[dict],
    out: Path,
    keys: list[str],
    metrics: list[str],
    paper: dict | None = None,
    title: str = "",
    curves: list[str] = (),
    xs: list[str] = ("step", "seconds"),
) -> tuple[str, list[Path]]:
    """Write ``<out>.md``, ``<out>.csv`` and ``<out>_<curve>.png``; returns (md, paths).
    Rows are grouped by ``keys`` and by any override that differs between the runs."""
    keys = row_keys(runs, keys)
    md, rows = markdown_table(runs, keys, metrics, paper, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = [out.with_suffix(".md"), out.with_suffix(".csv")]
    written[0].write_text(md)
    with open(written[1], "w", newline="") as f:
        csv.writer(f).writerows(rows)
    for metric in curves:
        from ebmlab.utils.plotting import save

        fig = curve_figure(runs, keys, metric, xs, title)
        written.append(save(fig, out.parent / f"{out.name}_{metric}.png"))
    return md, written
