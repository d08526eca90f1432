"""ebm_mixing end to end from a trained checkpoint (the tiny ebm_learning run of
tests/tasks/conftest.py): samplers, ACS tuning, the AB diagonal variant, config errors, and
kill/resume."""

from __future__ import annotations

import contextlib
import io
import math
import sys

import pytest

from ebmlab.utils.logging import read_metrics
from tests.helpers import REPO, run_cli


def mixing_args(checkpoint, *extra, experiment="acs/fig5_ebm_mixing", n_steps=20) -> list[str]:
    return [
        f"experiment={experiment}",
        "scale=smoke",
        f"task.checkpoint={checkpoint}",
        "model.n_channels=4",
        "model.n_blocks=0",
        "task.n_chains=6",
        f"run.n_steps={n_steps}",
        "task.n_show=6",
        *extra,
    ]


def _cli_inprocess(args, run_dir):
    """``python -m ebmlab.run`` in this process: (exit code, captured stderr)."""
    import ebmlab.run as entry

    argv = [entry.__file__, f"--config-path={REPO / 'conf'}", *args]
    argv += ["logger=none", "progress=false", f"hydra.run.dir={run_dir}"]
    old, entry._STATE["task_started"] = sys.argv, False
    err = io.StringIO()
    code = 0
    try:
        sys.argv = argv
        with contextlib.redirect_stderr(err):
            entry.cli()
    except SystemExit as e:
        code = e.code or 0
    finally:
        sys.argv = old
    return code, err.getvalue()


def test_ebm_mixing_runs_from_checkpoint(trained_ebm, tmp_path):
    d, _ = trained_ebm
    args = mixing_args(d, "sampler=dmala")
    r = run_cli(args, tmp_path / "mix").results
    assert r["weights"] == "ema" and r["n_steps"] == 20 and 0 < r["accept_rate"] <= 1
    assert math.isfinite(r["initial_mean_log_prob"]) and r["tune_steps"] == 0
    rows = [x for x in read_metrics(tmp_path / "mix" / "metrics.jsonl") if "mean_log_prob" in x]
    assert [row["step"] for row in rows] == [5, 10, 15, 20]  # log_every 5 at smoke scale
    assert rows[-1]["mean_log_prob"] == r["final_mean_log_prob"]
    assert (tmp_path / "mix" / "figures" / "mean_log_prob.png").exists()
    assert (tmp_path / "mix" / "figures" / "samples.png").exists()
    # a checkpoint that does not fit the model config fails clearly (exit 2, names the key)
    code, err = _cli_inprocess([*args, "model.n_channels=8"], tmp_path / "bad")
    assert code == 2 and "model" in err and "n_channels" in err and "Traceback" not in err


def test_mixing_without_checkpoint_is_a_config_error(tmp_path):
    code, err = _cli_inprocess(["experiment=acs/fig5_ebm_mixing", "scale=smoke"], tmp_path / "run")
    assert code == 2 and "task.checkpoint" in err


@pytest.mark.slow
def test_acs_is_tuned_first_and_ab_diag_gets_the_data_variance(trained_ebm, tmp_path):
    d, _ = trained_ebm
    # the smoke tuning budget is 100 steps, within the run
    acs = run_cli(mixing_args(d, "sampler=acs", n_steps=100), tmp_path / "acs").results
    assert acs["tune_steps"] > 0 and acs["tune_seconds"] > 0
    assert acs["seconds"] > acs["tune_seconds"]  # the tuning time is included
    ab = run_cli(mixing_args(d, experiment="ab/fig4_ebm_mixing"), tmp_path / "ab").results
    assert 0 < ab["accept_rate"] <= 1 and ab["tune_steps"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [75, 100], ids=["mid_run", "after_last_checkpoint"])
def test_ebm_mixing_resumes_exactly_after_a_kill(trained_ebm, tmp_path, kill_at):
    """ACS (tuned in build, again on resume) killed between checkpoints or after the last
    step: every number but the timings is identical to the uninterrupted run."""
    d, _ = trained_ebm
    args = mixing_args(d, "sampler=acs", "run.checkpoint_every=50", n_steps=100)
    full = run_cli(args, tmp_path / "full").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(args, tmp_path / "kill", env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "kill").results
    timing = {"seconds", "steps_per_second", "tune_seconds"}
    assert {k: v for k, v in resumed.items() if k not in timing} == {
        k: v for k, v in full.items() if k not in timing
    }


def test_a_sampler_declaring_it_gets_the_data_variance(trained_ebm, tmp_path, monkeypatch):
    """ebm_mixing hands m (1 - m) to any sampler that declares ``uses_data_variance`` (here
    DMALA made to declare it), not by its class; AB-diag declares it, DMALA does not."""
    import torch

    from ebmlab.core.protocols import UsesDataVariance
    from ebmlab.samplers.dlp import DMALA
    from tests.helpers import from_conf

    ab_diag = from_conf("sampler/ab_diag")
    assert ab_diag.uses_data_variance and isinstance(ab_diag, UsesDataVariance)
    assert not DMALA.uses_data_variance
    given: list = []
    monkeypatch.setattr(DMALA, "set_data_variance", given.append, raising=False)
    code, err = _cli_inprocess(mixing_args(trained_ebm[0], "sampler=dmala"), tmp_path / "no")
    assert code == 0 and given == [], err
    monkeypatch.setattr(DMALA, "uses_data_variance", True)
    code, err = _cli_inprocess(mixing_args(trained_ebm[0], "sampler=dmala"), tmp_path / "yes")
    assert code == 0 and len(given) == 1, err
    var = given[0]
    assert var.numel() == 784 and bool(((var > 0) & (var <= 0.25)).all())

    from ebmlab.tasks.ebm_mixing import give_data_variance

    class Model:
        base_mean = torch.tensor([0.5, 0.1, 0.9])

    class StandIn:  # no Sampler base, no ABDiag: only the declaration
        uses_data_variance = True

        def set_data_variance(self, v):
            given.append(v)

    give_data_variance(StandIn(), Model())
    assert torch.allclose(given[-1], torch.tensor([0.25, 0.09, 0.09]))
