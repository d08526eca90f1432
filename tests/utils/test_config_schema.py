"""Records of the layout before the ``run:`` node (issue 44) stay readable and keep matching.

The proof that an old record still matches: its config read through ``upgrade`` hashes to the
config composed today from its command-line overrides (read in today's keys). One committed
record per task (records/), fixtures (tests/fixtures/old_layout/configs.json, made by the code
of faf037c) for the tasks with no record. And a run directory that code started resumes today.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import open_dict

from ebmlab.errors import ConfigError
from ebmlab.runs.rundirs import collect, identity_key
from ebmlab.utils.config import compose_job
from ebmlab.utils.config_schema import (
    OLD_LAYOUTS,
    old_keys,
    upgrade,
    upgrade_override,
    upgrade_overrides,
)
from ebmlab.utils.overrides import check_keys
from ebmlab.utils.rundir import config_hash, hash_matches, identity
from tests.helpers import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "old_layout"


def _old_records() -> dict[str, tuple[list[str], dict]]:
    """Task target -> (overrides, run_config.json) of one committed record of it, one that
    overrides an old key where there is one."""
    found: dict[str, tuple[list[str], dict]] = {}
    for f in sorted((REPO / "records").rglob("run_config.json")):
        overrides = f.parent / ".hydra" / "overrides.yaml"
        if not overrides.is_file():
            continue
        record = json.loads(f.read_text())
        target = record["config"]["task"]["_target_"]
        ov = [str(o) for o in yaml.safe_load(overrides.read_text()) or []]
        old = any(o.split("=")[0].lstrip("+~") in old_keys(target) for o in ov)
        if target not in found or (old and not found[target][2]):
            found[target] = (ov, record, old)
    return {t: (ov, rec) for t, (ov, rec, _) in found.items()}


def _cases() -> list[tuple[str, list[str], dict]]:
    cases = [(f"record:{t.rsplit('.', 1)[1]}", ov, rec) for t, (ov, rec) in _old_records().items()]
    made = json.loads((FIXTURES / "configs.json").read_text())
    cases += [(f"fixture:{name}", c["overrides"], c["run_config"]) for name, c in made.items()]
    return cases


CASES = _cases()


def test_every_task_has_an_old_record_or_fixture():
    covered = {rec["config"]["task"]["_target_"] for _, _, rec in CASES}
    assert covered >= set(OLD_LAYOUTS), set(OLD_LAYOUTS) - covered


@pytest.mark.parametrize("name,overrides,record", CASES, ids=[c[0] for c in CASES])
def test_an_old_record_hashes_as_its_run_composed_today(name, overrides, record):
    config = record["config"]
    assert hash_matches(config, record["hash"])  # the record itself, as committed
    target = config["task"]["_target_"]
    _, cfg = compose_job([upgrade_override(o, target) for o in overrides])
    with open_dict(cfg):
        del cfg["hydra"]
    today = identity(cfg)
    assert config_hash(upgrade(config)) == today["hash"]
    assert today["hash"] != record["hash"]  # the layout did change: this is no identity
    assert set(today["config"]["run"]) == {"n_steps", "eval_every", "checkpoint_every"}
    stale = [k for k in old_keys(target) if k.startswith("task.")]
    assert not [k for k in stale if k.split(".")[1] in today["config"]["task"]]


def test_upgrade_is_idempotent_and_leaves_its_argument_alone():
    _, _, record = next(c for c in CASES if "GRBMGmm" in c[2]["config"]["task"]["_target_"])
    old = record["config"]
    kept = copy.deepcopy(old)
    new = upgrade(old)
    assert old == kept
    assert upgrade(new) == new
    assert new["run"]["n_steps"] == old["learner"]["n_epochs"] == new["learner"]["n_epochs"]
    assert new["run"]["eval_every"] == old["task"]["eval_every"]
    assert "eval_every" not in new["task"] and "checkpoint_every" not in new["task"]
    unknown = {"task": {"_target_": "my.Task", "n_steps": 3}}  # a task this module never knew
    assert upgrade(unknown) == unknown


def test_old_overrides_read_in_todays_keys():
    graph = "ebmlab.tasks.graph_generation.GraphGeneration"
    old = {"task.n_iters": "2000", "task.eval_every": "1000", "seed": "0", "task.log_every": "50"}
    assert upgrade_overrides(old, graph) == {
        "run.n_steps": "2000",
        "task.generate_every": "1000",
        "seed": "0",
        "run.eval_every": "50",
    }
    grbm = "ebmlab.tasks.grbm_gmm.GRBMGmm"
    assert upgrade_override("learner.n_epochs=5000", grbm) == "run.n_steps=5000"
    rbm = "ebmlab.tasks.rbm_sampling.RBMSampling"  # learner=cd's n_epochs trains the target RBM
    assert upgrade_override("learner.n_epochs=2", rbm) == "learner.n_epochs=2"
    assert upgrade_override("+task.n_steps=7", rbm) == "+run.n_steps=7"


def test_old_keys_on_the_command_line_name_the_new_key(tmp_path):
    """Before any compute, exit 2, one line: not Hydra's 'Key not in struct' traceback."""
    cases = [
        (["experiment=dlp/fig5_ising_learning", "task.n_iters=5"], "run.n_steps"),
        (["experiment=grbm/fig1_gmm", "learner.n_epochs=5000"], "run.n_steps"),
        (["experiment=acs/fig1_toy", "task.log_every=7"], "run.eval_every"),
        (["experiment=rmwggis/table1_synthetic", "task.eval_every=40"], "task.mmd_every"),
        (["experiment=rmwggis/table2_graphs", "task.eval_every=40"], "task.generate_every"),
        (["experiment=dlp/fig3_ising_sampling", "task.n_iters=5"], "run.n_steps"),
    ]
    for args, new in cases:
        with pytest.raises(ConfigError, match=rf"^{args[1].split('=')[0]}: .*{new}"):
            check_keys(args, [REPO / "conf"])
    check_keys(["experiment=dlp/fig4_rbm_sampling", "learner.n_epochs=2"], [REPO / "conf"])
    args = ["experiment=dlp/fig3_ising_sampling", "task.n_steps=125000"]
    p = run_cli(args, tmp_path / "r", check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == (
        "ebmlab: configuration error: task.n_steps: this key is now run.n_steps; run length and "
        "loop cadence are run.n_steps, run.eval_every, run.checkpoint_every"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_run_directory_of_the_old_layout_resumes_and_keeps_its_record(tmp_path):
    """A run started by the code before the run: node (killed at step 25 of 40, checkpoint at
    20) resumes under today's keys: the same numbers as a fresh run today, its run_config.json
    untouched, its results computed under its recorded hash, and it counts as the same run."""
    old = tmp_path / "old"
    shutil.copytree(FIXTURES / "ising_sampling_run", old, symlinks=True)
    recorded = (old / "run_config.json").read_bytes()
    old_hash = json.loads(recorded)["hash"]
    args = [
        "experiment=dlp/fig3_ising_sampling",
        "scale=smoke",
        "model.n_side=3",
        "task.n_chains=4",
        "run.n_steps=40",
        "run.eval_every=10",
        "run.checkpoint_every=20",
        "sampler=gwg",
    ]
    resumed = run_cli(args, old)
    fresh = run_cli(args, tmp_path / "fresh")
    assert "already complete" not in resumed.stdout
    timing = {"seconds", "ess_per_second"}
    assert {k: v for k, v in resumed.results.items() if k not in timing} == {
        k: v for k, v in fresh.results.items() if k not in timing
    }
    assert (old / "run_config.json").read_bytes() == recorded
    assert json.loads((old / "results.json").read_text())["config_hash"] == old_hash
    steps = [json.loads(r)["step"] for r in (old / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 40  # each step logged once
    again = run_cli(args, old)  # finished: its results come back as they are
    assert "already complete" in again.stdout
    runs = collect(tmp_path)
    assert len(runs) == 1  # the old record and today's fresh run are one run
    assert identity_key({**runs[0], "config": upgrade(json.loads(recorded)["config"])}) == (
        identity_key(runs[0])
    )
    for run in (collect(old)[0], collect(tmp_path / "fresh")[0]):
        assert run["config"]["run"] == {"n_steps": 40, "eval_every": 10, "checkpoint_every": 20}
        assert "n_steps" not in run["config"]["task"]
    assert collect(old)[0]["overrides"]["run.n_steps"] == "40"  # recorded as task.n_steps=40


@pytest.mark.slow
def test_a_run_directory_of_another_config_is_still_refused(tmp_path):
    old = tmp_path / "old"
    shutil.copytree(FIXTURES / "ising_sampling_run", old, symlinks=True)
    args = ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "model.n_side=3"]
    args += ["task.n_chains=4", "run.n_steps=40", "run.eval_every=5", "run.checkpoint_every=20"]
    p = run_cli([*args, "sampler=gwg"], old, check=False)
    assert p.returncode == 2 and "differs at: run.eval_every" in p.stderr, p.stderr
    assert Path(old / "run_config.json").exists()
