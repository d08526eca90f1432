"""Every config in conf/ composes, and every group option validates against its schema."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

import ebmlab.run  # noqa: F401 - registers resolvers
from ebmlab.utils.config import validate_node

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ["task", "model", "dataset", "sampler", "learner", "logger", "scale", "experiment"]


def options(group: str) -> list[str]:
    d = CONF / group
    return sorted(p.relative_to(d).with_suffix("").as_posix() for p in d.rglob("*.yaml"))


def compose_cfg(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def _resolve(cfg: DictConfig) -> None:
    # hydra: interpolations need the HydraConfig singleton; resolve the rest.
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)
    OmegaConf.to_container(cfg, resolve=True)


@pytest.mark.parametrize("group", GROUPS)
def test_group_has_options(group):
    assert options(group), f"conf/{group} is empty"


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_validates(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    _resolve(cfg)
    node = cfg.get(group) if group not in ("experiment", "scale") else None
    if isinstance(node, DictConfig) and "_target_" in node:
        validate_node(node, group)
    if group == "experiment":
        for g in ("task", "model", "dataset", "sampler", "learner"):
            n = cfg.get(g)
            if isinstance(n, DictConfig) and "_target_" in n:
                validate_node(n, g)


@pytest.mark.parametrize("launcher", ["slurm", "submitit_local"])
def test_launchers_compose(launcher):
    cfg = compose_cfg([f"hydra/launcher={launcher}"])
    assert "submitit" in cfg.hydra.launcher._target_


def test_smoke_scale_changes_sizes():
    paper = compose_cfg(["experiment=ising_learning"])
    smoke = compose_cfg(["experiment=ising_learning_smoke"])
    assert paper.dataset.n_side == 25 and paper.task.n_iters == 10000
    assert smoke.dataset.n_side < 25 and smoke.task.n_iters < 10000
