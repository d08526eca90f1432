"""Where an experiment's runs live, and what its sweep sets (read from its config file)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ebmlab.configs import config_dir

CONF = config_dir()  # conf/ of the checkout, or ebmlab/conf of an installed wheel
RUN_ROOTS = ("runs", "multirun")  # single runs and sweep jobs, below the outputs root


def experiment_file(experiment: str) -> Path:
    path = CONF / "experiment" / f"{experiment}.yaml"
    if not path.is_file():
        known = sorted(
            p.relative_to(CONF / "experiment").with_suffix("").as_posix()
            for p in (CONF / "experiment").rglob("*.yaml")
        )
        raise SystemExit(f"unknown experiment {experiment!r}; known: {', '.join(known)}")
    return path


def experiment_exists(experiment: str) -> bool:
    """Whether ``conf/experiment/<experiment>.yaml`` exists (a claim that ``needs`` what ebmlab
    lacks may name an experiment not written yet)."""
    return (CONF / "experiment" / f"{experiment}.yaml").is_file()


def sweep_keys(experiment: str) -> set[str]:
    """The keys an experiment's own sweep sets (``hydra.sweeper.params``), following the
    experiments it extends through its defaults list when it has no sweep of its own."""
    node = yaml.safe_load(experiment_file(experiment).read_text()) or {}
    params = ((node.get("hydra") or {}).get("sweeper") or {}).get("params")
    if params:
        return set(params)
    keys: set[str] = set()
    for entry in node.get("defaults") or []:
        if isinstance(entry, str) and (CONF / "experiment" / f"{entry}.yaml").is_file():
            keys |= sweep_keys(entry)
    return keys


def sweep_dir(root: Path, experiment: str, scale: str) -> Path:
    """Where ``python -m ebmlab.run -m experiment=<experiment> scale=<scale>`` writes."""
    return Path(root) / "multirun" / experiment / scale


def run_dirs(root: Path, experiment: str, scale: str) -> list[Path]:
    """Where the runs of ``experiment`` at ``scale`` live below ``root``: its sweeps
    (``multirun/<experiment>/<scale>``) and its single runs (``runs/<experiment>/<scale>``)."""
    sweeps = sweep_dir(root, experiment, scale)
    return [sweeps, Path(root) / "runs" / sweeps.relative_to(Path(root) / "multirun")]
