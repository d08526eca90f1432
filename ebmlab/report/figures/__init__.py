"""One module per benchmark's cross-run figure; ``FIGURES[kind](runs, out, title, **options)``
writes the figure of a report spec's ``figures:`` item and returns the written paths."""

from __future__ import annotations

import shutil
from pathlib import Path

from ebmlab.plotting import density_modeling, grbm_gmm, multimodal_2d, rbm_sampling
from ebmlab.report.figures import metric_vs_setting


def copy_run_file(runs: list[dict], out: Path, title: str = "", file: str = "") -> list[Path]:
    """Copy ``file`` (relative to a run directory) of the first run that has it."""
    for r in sorted(runs, key=lambda r: str(r["run_dir"])):
        src = r["run_dir"] / file
        if src.is_file():
            dst = out.with_suffix(src.suffix)
            shutil.copyfile(src, dst)
            return [dst]
    return []


FIGURES = {
    "copy": copy_run_file,
    "density_grid": density_modeling.make,
    "grbm_gmm": grbm_gmm.make,
    "metric_vs_setting": metric_vs_setting.make,
    "multimodal_2d": multimodal_2d.make,
    "rbm_sampling": rbm_sampling.make,
}
