"""scripts/investigations/grbm_variance_collapse.py: it replays the run's training for any of
the four Langevin settings, and a divergence ends the replay with a record that says where."""

import json

import pytest

from ebmlab.errors import DivergenceError
from tests.investigations.script import load_script

pytestmark = pytest.mark.usefixtures("one_thread")


def test_an_unadjusted_setting_takes_every_proposal(tmp_path, monkeypatch):
    script = load_script("grbm_variance_collapse")
    monkeypatch.setattr(script, "OUT", tmp_path)
    script.main(["--setting", "langevin_wo_adjust", "--epochs", "2", "--every", "1"])
    record = json.loads((tmp_path / "langevin_wo_adjust_gmm_iso_none.json").read_text())
    assert [r["epoch"] for r in record["rows"]] == [1, 2]
    assert all(r["accept"] == 1.0 for r in record["rows"]) and "diverged" not in record


def test_a_divergence_ends_the_replay_and_is_recorded(tmp_path, monkeypatch):
    script = load_script("grbm_variance_collapse")
    monkeypatch.setattr(script, "OUT", tmp_path)
    from ebmlab.learning.grbm_cd import GRBMModifiedCD as GRBMCD

    calls = {"n": 0}
    step = GRBMCD.step

    def failing_step(self, model, gen):
        calls["n"] += 1
        if calls["n"] > 10:  # the second epoch's first update
            raise DivergenceError(calls["n"], "gradient")
        return step(self, model, gen)

    monkeypatch.setattr(GRBMCD, "step", failing_step)
    script.main(["--setting", "gibbs_langevin_wo_adjust", "--epochs", "5", "--every", "1"])
    stem = tmp_path / "gibbs_langevin_wo_adjust_gmm_iso_none"
    record = json.loads(stem.with_suffix(".json").read_text())
    assert [r["epoch"] for r in record["rows"]] == [1]
    assert record["diverged"].startswith("diverged in epoch 2: training diverged at step 11")
    assert "Training diverged in epoch 2" in stem.with_suffix(".md").read_text()
