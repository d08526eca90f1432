"""Warnings for finite but suspect runs: a sampler whose acceptance collapses."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core.health import Health
from ebmlab.core.loop import Cadence, LoopTask
from ebmlab.errors import ConfigError
from tests.core.test_loop import make_ctx
from tests.helpers import run_toy


def test_low_acceptance_windows_are_recorded_with_the_first_and_the_lowest(capsys):
    h = Health(0.01)
    h.observe({"accept_rate": 0.6}, 50)
    assert h.messages() == []
    h.observe({"accept_rate": 0.005}, 100)
    assert "0.005 in the log window ending at step 100" in capsys.readouterr().err
    h.observe({"accept_rate": 0.2}, 150)
    h.observe({"accept_rate": 0.0007}, 200)
    (msg,) = h.messages()
    assert "2 log window(s) below it, the lowest 0.0007 at step 200" in msg
    again = Health(0.01)
    again.load_state_dict(h.state_dict())
    assert again.messages() == h.messages()


def test_no_check_when_off_or_without_an_acceptance():
    off = Health(0.0)
    off.observe({"accept_rate": 0.0}, 1)
    assert off.messages() == []
    h = Health(0.5)
    h.observe({"loss": 0.0}, 1)
    h.observe({"accept_rate": float("nan")}, 2)
    assert h.messages() == []


@pytest.mark.parametrize("bad", [-0.1, 1.0, "0.1", True])
def test_bad_thresholds_and_keys_are_config_errors(bad):
    with pytest.raises(ConfigError, match="health.min_accept_rate"):
        Health(bad)
    with pytest.raises(ConfigError, match="health.min_accept"):
        Health.from_config({"min_accept": 0.1})


class Freezing(LoopTask):
    """Acceptance 0.7 until ``freeze_at``, then 0.001 (an energy whose scale ran away)."""

    def __init__(self, n=40, freeze_at=25, crash_at=None):
        self.cad = Cadence(n, 5, 10)
        self.freeze_at, self.crash_at = freeze_at, crash_at

    def build(self, ctx):
        return {}

    def step(self, parts, step, ctx):
        if step == self.crash_at:
            raise KeyboardInterrupt
        return {"accept_rate": torch.tensor(0.001 if step > self.freeze_at else 0.7)}

    def evaluate(self, parts, step, ctx):
        return {}

    def finish(self, parts, history, ctx):
        return {"accept_rate": ctx.totals.mean("accept_rate")}


def _ctx(tmp_path, min_accept_rate=0.01):
    ctx = make_ctx(tmp_path)
    ctx.cfg = OmegaConf.create({**ctx.cfg, "health": {"min_accept_rate": min_accept_rate}})
    return ctx


def test_a_run_whose_chains_freeze_finishes_with_a_warning_in_results_json(tmp_path):
    ctx = _ctx(tmp_path / "a")
    run_toy(Freezing(), ctx)
    (msg,) = ctx.warnings
    assert "step 30" in msg and "3 log window(s)" in msg and "lowest 0.001 at step 30" in msg
    ctx.write_results({"accept_rate": 0.5})
    assert json.loads((tmp_path / "a" / "results.json").read_text())["warnings"] == [msg]
    healthy = _ctx(tmp_path / "b")
    run_toy(Freezing(freeze_at=40), healthy)
    healthy.write_results({"accept_rate": 0.7})
    assert healthy.warnings == []
    assert "warnings" not in json.loads((tmp_path / "b" / "results.json").read_text())


def test_a_resumed_run_reports_the_warnings_of_an_uninterrupted_one(tmp_path):
    whole = _ctx(tmp_path / "whole")
    run_toy(Freezing(), whole)
    with pytest.raises(KeyboardInterrupt):  # killed after the checkpoint at 30 (one low window)
        run_toy(Freezing(crash_at=33), _ctx(tmp_path / "split"))
    resumed = _ctx(tmp_path / "split")
    run_toy(Freezing(), resumed)
    assert resumed.warnings == whole.warnings != []
