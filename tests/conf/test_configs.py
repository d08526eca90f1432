"""Every config in conf/ composes and validates, at both scales; the Makefile holds no setting.

- every option of every group validates against its ``_target_``'s schema;
- every experiment (``conf/experiment/<paper>/<name>.yaml``) composes at paper and smoke scale
  with its per-choice settings (``conf/when/<experiment>/``, composed by Hydra), names its own
  path, and its sweep parses into known options; at smoke scale every sweep point validates,
  and every table row option does at both scales;
- the report node names existing experiments, figure kinds and paper-value files;
- no Makefile / mk/*.mk recipe carries a hyperparameter: they name experiments only.
"""

from __future__ import annotations

import itertools
import re
import warnings
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

import ebmlab.run  # noqa: F401 - registers resolvers
from ebmlab.report.figures import FIGURES
from ebmlab.report.spec import load_paper
from ebmlab.utils.config import validate_node

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
GROUPS = ["task", "model", "dataset", "sampler", "learner", "logger", "scale", "experiment"]
NODES = ("task", "model", "dataset", "sampler", "learner", "logger")
SCALES = ("paper", "smoke")
# config groups whose options are the rows of one experiment's table
ROW_GROUPS = {
    "ab_target": "ab/tables1to5_ess",
    "grbm_gmm_setting": "grbm/fig1_gmm",
    "grbm_mnist_row": "grbm/table1_mnist_fid",
}
MAKEFILES = [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]


def options(group: str) -> list[str]:
    d = CONF / group
    return sorted(p.relative_to(d).with_suffix("").as_posix() for p in d.rglob("*.yaml"))


EXPERIMENTS = options("experiment")


@pytest.fixture(scope="module", autouse=True)
def _hydra():
    """One Hydra initialisation for the module (composing is the slow part of these tests)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield


def compose_cfg(overrides: list[str]) -> DictConfig:
    """The job config of ``python -m ebmlab.run <overrides>`` (resolvable): what Hydra composes
    is what runs (an experiment's per-choice settings are composed files, conf/when/)."""
    cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def validate_all(cfg: DictConfig) -> None:
    OmegaConf.to_container(cfg, resolve=True)
    for g in NODES:
        node = cfg.get(g)
        if isinstance(node, DictConfig) and "_target_" in node:
            validate_node(node, g)


def sweep_points(cfg: DictConfig, every: bool = True) -> list[list[str]]:
    """The jobs of ``-m`` for this config, one override list each: every point of the sweep,
    or (``every=False``) the first point and each other value of one axis at a time."""
    params = cfg.hydra.sweeper.params
    if not params:
        return [[]]
    values = OmegaConf.to_container(params, resolve=True)
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in values.items()])
    axes = [
        [f"{o.key_or_group}={v}" for v in o.sweep_string_iterator()]
        if o.is_sweep_override()
        else [f"{o.key_or_group}={o.value()}"]
        for o in parsed
    ]
    if every:
        return [list(p) for p in itertools.product(*axes)]
    first = [axis[0] for axis in axes]
    return [first] + [first[:i] + [v] + first[i + 1 :] for i, ax in enumerate(axes) for v in ax[1:]]


@pytest.mark.parametrize("group", GROUPS + list(ROW_GROUPS))
def test_group_has_options(group):
    assert options(group), f"conf/{group} is empty"


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS[:-1] for o in options(g)])
def test_every_option_composes_and_validates(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    OmegaConf.to_container(cfg, resolve=True)
    node = cfg.get(group)
    if isinstance(node, DictConfig) and "_target_" in node:  # with the default other groups
        validate_node(node, group)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("scale", SCALES)
def test_experiment_composes_at_both_scales(experiment, scale):
    cfg = compose_cfg([f"experiment={experiment}", f"scale={scale}"])
    validate_all(cfg)
    assert cfg.name == experiment, "an experiment's name is its path under conf/experiment/"
    assert cfg.hydra.runtime.choices.scale == scale
    run_dir = OmegaConf.to_container(cfg.hydra.run, resolve=True)["dir"]
    sweep_dir = OmegaConf.to_container(cfg.hydra.sweep, resolve=True)["dir"]
    assert run_dir.startswith(f"outputs/runs/{experiment}/{scale}/")
    assert sweep_dir == f"outputs/multirun/{experiment}/{scale}"
    for point in sweep_points(cfg):  # every value names a known option
        for ov in point:
            key, value = ov.split("=", 1)
            if (CONF / key).is_dir():
                assert value in options(key), f"{experiment}: sweep {ov}: unknown option"


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_sweep_value_validates_at_smoke_scale(experiment):
    base = [f"experiment={experiment}", "scale=smoke"]
    for point in sweep_points(compose_cfg(base), every=False):
        validate_all(compose_cfg(base + point))


@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("scale", SCALES)
def test_every_sweep_point_validates(experiment, scale):
    """The whole grid: per-choice settings that apply only to some combinations included."""
    base = [f"experiment={experiment}", f"scale={scale}"]
    for point in sweep_points(compose_cfg(base)):
        validate_all(compose_cfg(base + point))


@pytest.mark.parametrize("group", ROW_GROUPS)
def test_every_row_option_validates_at_paper_scale(group):
    """(At smoke scale the sweep test above covers them: the rows are swept.)"""
    for option in options(group):
        validate_all(compose_cfg([f"experiment={ROW_GROUPS[group]}", f"{group}={option}"]))


def test_when_settings_follow_the_sweep_point():
    """DLP Fig. 3's step sizes come with the sampler; the command line still wins."""
    exp = "experiment=dlp/fig3_ising_sampling"
    assert compose_cfg([exp, "sampler=dmala"]).sampler.step_size == 0.4
    assert compose_cfg([exp, "sampler=dula"]).sampler.step_size == 0.2
    assert compose_cfg([exp, "sampler=dmala", "sampler.step_size=0.3"]).sampler.step_size == 0.3
    ebm = compose_cfg(["experiment=dlp/table1_ebm_learning", "dataset=caltech", "sampler=acs"])
    assert ebm.learner.buffer_size == 1000 and ebm.learner.sampler_steps == 30
    assert ebm.sampler.target_accept == 0.7
    smoke = compose_cfg(
        ["experiment=dlp/table1_ebm_learning", "dataset=caltech", "sampler=acs", "scale=smoke"]
    )
    assert smoke.learner.sampler_steps == 5
    # a condition on a config value; a later, more specific entry wins
    syn = ["experiment=rmwggis/table1_synthetic", "dataset.name=checkerboard"]
    assert compose_cfg(syn).learner.lr == 1e-4
    assert compose_cfg([*syn, "scale=smoke"]).learner.lr == 2e-4
    assert compose_cfg(["experiment=rmwggis/table1_synthetic", "scale=smoke"]).learner.lr == 1e-3


WHEN = CONF / "when"
WHEN_EXPERIMENTS = sorted(
    p.parent.relative_to(WHEN).as_posix() for p in WHEN.rglob("conditions.yaml")
)


def test_no_config_carries_a_when_node():
    """Per-choice settings are files Hydra composes (conf/when/); a `when:` node in a config
    would no longer be applied, and the runner refuses one."""
    from ebmlab.errors import ConfigError
    from ebmlab.utils.config import reject_when

    carrying = [
        str(p.relative_to(CONF))
        for p in CONF.rglob("*.yaml")
        if "when" in (yaml.safe_load(p.read_text()) or {})
    ]
    assert not carrying
    with pytest.raises(ConfigError, match="conf/when/<experiment>"):
        reject_when(OmegaConf.create({"when": {"sampler=dmala": {"sampler.step_size": 0.4}}}))


def test_per_choice_folders_belong_to_experiments():
    assert WHEN_EXPERIMENTS and set(WHEN_EXPERIMENTS) <= set(EXPERIMENTS)


@pytest.mark.parametrize("experiment", WHEN_EXPERIMENTS)
def test_per_choice_files_name_existing_options_and_are_listed(experiment):
    """``conf/when/<experiment>/<group>[-<group>...]/<option>[-<option>...].yaml`` names real
    options of real groups, and conditions.yaml lists its folder: the entries are optional,
    so a misspelt name would otherwise be skipped without a word."""
    listed = (WHEN / experiment / "conditions.yaml").read_text()
    for f in sorted((WHEN / experiment).rglob("*.yaml")):
        if f.name == "conditions.yaml":
            continue
        folder = f.parent.relative_to(WHEN / experiment).as_posix()
        groups, choices = folder.split("-"), f.stem.split("-")
        assert len(groups) == len(choices), f
        for group, choice in zip(groups, choices):
            assert choice in options(group), f"{f}: {group}={choice} is no option"
        assert f"/when/{experiment}/{folder}@_global_:" in listed, f"{f} is never composed"


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("sampler", ["gibbs", "gwg", "dula", "dmala"])
def test_composed_config_carries_the_per_choice_settings(sampler, scale):
    """What Hydra composes (``--cfg job``, .hydra/config.yaml) holds DLP Fig. 3's step per
    sampler and the smoke length: no setting is applied after composition any more."""
    cfg = compose_cfg(
        ["experiment=dlp/fig3_ising_sampling", f"scale={scale}", f"sampler={sampler}"]
    )
    assert cfg.run.n_steps == {"paper": 50000, "smoke": 1000}[scale]
    step = {"dula": 0.2, "dmala": 0.4}.get(sampler)
    assert cfg.sampler.get("step_size") == step
    choices = cfg.hydra.runtime.choices
    assert choices.sampler == sampler and choices.scale == scale


def test_per_choice_settings_of_table_rows_and_config_values():
    """A row option's smoke size (GRBM Table 2: H / 32) and a value keyed by a config value
    (RMwGGIS's checkerboard step, per scale) come from composition too."""
    fid = ["experiment=grbm/table1_mnist_fid", "grbm_mnist_row=gl_wo_adjust_cd50_h8192"]
    assert compose_cfg(fid).model.n_hidden == 8192
    assert compose_cfg([*fid, "scale=smoke"]).model.n_hidden == 256
    assert compose_cfg([fid[0], "scale=smoke"]).model.n_hidden == 128
    syn = ["experiment=rmwggis/table1_synthetic", "dataset.name=checkerboard", "learner=rm"]
    assert compose_cfg([*syn, "scale=smoke", "learner.lr=0.5"]).learner.lr == 0.5  # CLI wins


def test_ising_learning_learns_what_each_paper_learns():
    """DLP Fig. 5 learns J only (Sec. 7.3.1); RMwGGIS Table 3 learns J and b (Sec. 5.2)."""
    assert compose_cfg(["experiment=dlp/fig5_ising_learning"]).model.learn_bias is False
    assert compose_cfg(["experiment=rmwggis/table3_ising_learning"]).model.learn_bias is True


def test_smoke_scale_changes_sizes():
    paper = compose_cfg(["experiment=dlp/fig5_ising_learning"])
    smoke = compose_cfg(["experiment=dlp/fig5_ising_learning", "scale=smoke"])
    assert paper.dataset.n_side == 25 and paper.run.n_steps == 10000
    assert smoke.dataset.n_side < 25 and smoke.run.n_steps < 10000


@pytest.mark.parametrize(
    ("launcher", "target", "settings"),
    [
        ("slurm", "SlurmLauncher", {"max_num_timeout": 3, "signal_delay_s": 120}),
        ("local", "LocalLauncher", {"cpus_per_task": 1, "mem_gb": 4}),
        ("submitit_local", "LocalLauncher", {}),  # the plugin's own schema, unextended
    ],
)
def test_launchers_compose_without_schema_warnings(launcher, target, settings):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # implicit schema matching is deprecated in Hydra 1.1
        cfg = compose_cfg([f"hydra/launcher={launcher}"])
    launcher_cfg = cfg.hydra.launcher
    assert launcher_cfg._target_.endswith(target)
    assert launcher_cfg.submitit_folder.endswith(".submitit/%j")
    for key, value in settings.items():
        assert launcher_cfg[key] == value, key


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_report_node_is_valid(experiment):
    report = (yaml.safe_load((CONF / "experiment" / f"{experiment}.yaml").read_text())).get(
        "report"
    )
    if report is None:
        return
    assert set(report) <= {"tables", "figures", "inputs"}, experiment
    for item in report.get("tables") or []:
        assert item.get("group") and item.get("metrics"), f"{experiment}: table needs both"
        if item.get("paper"):  # names a table of conf/claims/*.yaml `tables:` (one home)
            assert load_paper(item), f"{experiment}: no paper table {item['paper']!r}"
        for other in (item.get("include") or []) + (item.get("experiments") or []):
            assert other in EXPERIMENTS, f"{experiment}: unknown experiment {other}"
    for item in report.get("figures") or []:
        assert item["kind"] in FIGURES, f"{experiment}: unknown figure kind {item['kind']}"
    for src in (report.get("inputs") or {}).values():
        assert src["experiment"] in EXPERIMENTS and src.get("key")


def _recipes() -> list[str]:
    lines = []
    for f in MAKEFILES:
        lines += [ln for ln in f.read_text().splitlines() if ln.startswith("\t")]
    return lines


def test_makefile_recipes_name_experiments_only():
    """Settings live in conf/: a recipe may pick an experiment and the scale, nothing else."""
    setting = re.compile(
        r"(?<![\w/.-])(task|model|dataset|sampler|learner|seed|name)(\.[\w.]+)?=|step_size|_SAMPLERS"
    )
    bad = [ln.strip() for ln in _recipes() if setting.search(ln)]
    assert not bad, "hyperparameters in the Makefile:\n" + "\n".join(bad)


def test_makefile_experiments_exist_and_have_reports():
    text = "\n".join(_recipes())
    runs = set(re.findall(r"experiment=([\w/]+)", text))
    tables = set(re.findall(r"\$\(REPORT\) (?:table|inputs) ([\w/]+)", text))
    assert runs and tables
    for e in runs | tables:
        assert e in EXPERIMENTS, f"the Makefile names unknown experiment {e}"
    for e in tables:
        assert yaml.safe_load((CONF / "experiment" / f"{e}.yaml").read_text()).get("report"), e


def test_makefile_keeps_the_known_targets():
    text = "\n".join(f.read_text() for f in MAKEFILES)
    for target in (
        "run",
        "table-ising-learning",
        "table-ising-learning-rm",
        "table-ising-sampling",
        "table-ab-ess",
        "figure-ab-ess-grid",
        "figure-acs-toy",
        "table-rmwggis-synthetic",
        "fig-rmwggis-scaling",
        "bench-ratio-matching",
        "table-graph-generation",
        "figure-grbm-gmm",
        "table-grbm-fid",
        "table-rbm-sampling",
        "table-rbm-learning",
        "table-ebm-learning",
        "figure-ebm-mixing",
        "bench",
    ):
        assert re.search(rf"^{re.escape(target)}:.*## ", text, re.M), target
