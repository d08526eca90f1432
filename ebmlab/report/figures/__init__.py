"""One module per benchmark's cross-run figure; ``FIGURES[kind](runs, out, title, **options)``
writes the figure of a report spec's ``figures:`` item and returns the written paths."""

from __future__ import annotations

import shutil
from pathlib import Path

from ebmlab.plotting import grbm_gmm
from ebmlab.report.figures import density_modeling, metric_vs_setting, multimodal_2d, rbm_sampling


def copy_run_file(runs: list[dict], out: Path, title: str = "", file: str = "") -> list[Path]:
    """Copy ``file`` (relative to a run directory) of the first run that has it."""
    for r in sorted(runs, key=lambda r: str(r["run_dir"])):
        src = r["run_dir"] / file
        if src.is_file():
            dst = out.with_suffix(src.suffix)
            shutil.copyfile(src, dst)
            return [dst]
    return []


def grbm_gmm_figure(runs: list[dict], out: Path, title: str = "") -> list[Path]:
    """GRBM Fig. 1 from the runs' ``gmm_arrays.pt`` (:func:`ebmlab.plotting.grbm_gmm.figure`)."""
    return [grbm_gmm.figure([r["run_dir"] for r in runs], out)]


FIGURES = {
    "copy": copy_run_file,
    "density_grid": density_modeling.make,
    "grbm_gmm": grbm_gmm_figure,
    "metric_vs_setting": metric_vs_setting.make,
    "multimodal_2d": multimodal_2d.make,
    "rbm_sampling": rbm_sampling.make,
}
