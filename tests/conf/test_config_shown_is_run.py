"""What Hydra shows is what runs: ``--cfg job``, the run's ``.hydra/config.yaml`` and its
``run_config.json`` agree (an experiment's per-choice settings are composed by Hydra, not
applied afterwards), and the configs in conf/ still give every recorded run its config hash
(scripts/check_record_hashes.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

from ebmlab.utils.config_schema import upgrade
from ebmlab.utils.rundir import NON_IDENTITY_KEYS, config_hash
from tests.helpers import REPO, run_cli

RECORDS = REPO / "records"


def _checker():
    spec = importlib.util.spec_from_file_location(
        "check_record_hashes", REPO / "scripts" / "check_record_hashes.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cfg_job(overrides: list[str]) -> dict:
    """``python -m ebmlab.run <overrides> --cfg job --resolve``, parsed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "ebmlab.run", *overrides, "--cfg", "job", "--resolve"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return yaml.safe_load(p.stdout)


def identity_hash(shown: dict) -> str:
    return config_hash({k: v for k, v in shown.items() if k not in NON_IDENTITY_KEYS})


@pytest.mark.slow
def test_cfg_job_and_hydra_files_show_the_settings_that_ran(tmp_path):
    """The issue's case: a smoke DLP Fig. 3 DMALA run runs step 0.4 for 1,000 steps, and
    that is what `--cfg job` previewed and what .hydra/config.yaml says (they said 0.2 and
    50,000 when the settings were applied after composition)."""
    overrides = ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "sampler=dmala"]
    run_dir = tmp_path / "run"
    run_cli([*overrides, "model.n_side=3"], run_dir)
    ran = json.loads((run_dir / "run_config.json").read_text())
    saved = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    for config in (ran["config"], saved):
        assert config["sampler"]["step_size"] == 0.4
        assert config["run"]["n_steps"] == 1000 and config["run"]["checkpoint_every"] == 250
    shown = cfg_job([*overrides, "model.n_side=3", "logger=none", "progress=false"])
    assert identity_hash(shown) == ran["hash"]


@pytest.mark.slow
def test_cfg_job_previews_a_recorded_run_exactly():
    """`--cfg job --resolve` with a recorded run's overrides gives that run's config hash: a
    run whose sampler settings come from conf/when/ (ACS Fig. 1, AB-1st: sigma 53, alpha 0.5),
    its recorded config read in today's layout."""
    run_dir = RECORDS / "multirun" / "acs" / "fig1_toy" / "paper" / "sampler=ab_1st,seed=0"
    if not (run_dir / "run_config.json").is_file():
        pytest.skip("no record of the ACS Fig. 1 AB-1st run")
    overrides = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
    shown = cfg_job(overrides)
    assert shown["sampler"]["sigma"] == 53.0 and shown["sampler"]["alpha"] == 0.5
    recorded = json.loads((run_dir / "run_config.json").read_text())["config"]
    # the record predates the run: node (issue 44); it is read through the schema upgrade
    assert identity_hash(shown) == config_hash(upgrade(recorded))


def test_records_of_each_experiment_keep_their_config_hash():
    """One recorded run per experiment and scale, composed from its overrides with today's
    conf/, has the config hash it recorded (the slow test below checks every record)."""
    check = _checker()
    runs = check.recorded_runs([RECORDS])
    if not runs:
        pytest.skip("no records")
    first = {}
    for run_dir in runs:
        first.setdefault(run_dir.parent, run_dir)
    changed = {str(d.relative_to(RECORDS)): check.check_run(d) for d in first.values()}
    assert not {d: keys for d, keys in changed.items() if keys}


@pytest.mark.slow
def test_every_record_keeps_its_config_hash():
    check = _checker()
    assert check.main([str(RECORDS)]) == 0


def test_a_changed_setting_is_reported_by_the_hash_check(tmp_path):
    """The check itself: a record whose config differs from what conf/ composes is listed."""
    check = _checker()
    src = RECORDS / "multirun" / "acs" / "fig1_toy" / "paper" / "sampler=ab_1st,seed=0"
    if not (src / "run_config.json").is_file():
        pytest.skip("no record of the ACS Fig. 1 AB-1st run")
    run_dir = tmp_path / "sampler=ab_1st,seed=0"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(
        (src / ".hydra" / "overrides.yaml").read_text()
    )
    recorded = json.loads((src / "run_config.json").read_text())
    recorded["config"]["sampler"]["sigma"] = 40.0
    recorded["hash"] = config_hash(recorded["config"])
    (run_dir / "run_config.json").write_text(json.dumps(recorded))
    assert check.check_run(run_dir) == ["sampler.sigma"]
    assert check.main([str(tmp_path)]) == 1
