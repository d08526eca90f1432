"""sampler_ess (AB ESS tables) task: the ESS_n normalisation on a known case, config checks,
and tiny end-to-end runs through the real entry point (LB tuning, AB adaptation within
burn-in, Gibbs query counts, kill and resume)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.metrics.ess import ess_1d, ess_per_queries
from ebmlab.utils.logging import read_metrics
from tests.helpers import (
    assert_same_results,
    check_before_compute,
    from_conf,
    run_cli,
    run_inprocess,
)

# ---------------------------------------------------------------------------------- ESS_n


def test_ess_n_on_ar1_chains_matches_the_analytic_value(gen):
    """AR(1) with coefficient phi has ESS = n (1 - phi) / (1 + phi); a sampler costing q
    queries per step then has ESS_n = ESS * 10,000 / (q n). Monte Carlo band from 64 chains."""
    n, chains, phi, q = 20000, 64, 0.6, 3
    e = torch.randn(n, chains, generator=gen, dtype=torch.float64)
    x = torch.zeros_like(e)
    x[0] = e[0] / math.sqrt(1 - phi**2)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    ess = ess_1d(x)
    expected = n * (1 - phi) / (1 + phi)
    got = ess_per_queries(float(ess.mean()), q * n)
    want = expected * 10_000 / (q * n)
    # per-chain relative sd of the ESS estimate is about 5% here; the mean over 64 chains 1%
    rel_sd = float(ess.std() / ess.mean()) / math.sqrt(chains)
    assert abs(got - want) / want < 5 * rel_sd + 0.01, (got, want)
    assert want == pytest.approx(10_000 * 0.25 / 3)
    with pytest.raises(ValueError):
        ess_per_queries(1.0, 0)


def test_sampler_ess_validates_its_config():
    ess = ["experiment=ab/tables1to5_ess", "scale=smoke"]
    with pytest.raises(ConfigError, match=r"task.burn_in: must be in \[0, run.n_steps - 4\]"):
        check_before_compute([*ess, "run.n_steps=100", "task.burn_in=98"])
    with pytest.raises(ConfigError, match="tune_accept"):
        from_conf("task/sampler_ess", tune_accept=1.5)
    with pytest.raises(ConfigError, match="tune_accept"):
        from_conf("task/sampler_ess", burn_in=0, tune_accept=0.5)
    with pytest.raises(ConfigError, match="tune_attr"):  # tunes the step size, nothing else
        from_conf("task/sampler_ess", tune_attr="radius")


# ---------------------------------------------------------------------------------- end to end

ESS = ["experiment=ab/tables1to5_ess", "scale=smoke"]
ESS_TINY = ["task.n_chains=4", "run.n_steps=300", "task.burn_in=100", "run.eval_every=50"]


def test_sampler_ess_end_to_end_dmala_tuned_on_small_ising(tmp_path):
    """LB baseline = DMALA tuned to 0.574 during burn-in: the step size moves during burn-in
    only, the reported counts are one query per step, ESS_n = ESS * 10,000 / (queries per
    step * post steps)."""
    args = [*ESS, "model.n_side=4", "sampler=dmala", "task.tune_accept=0.574", *ESS_TINY]
    r = run_cli(args, tmp_path / "lb").results
    assert r["step_size"] != pytest.approx(0.2)
    assert r["queries_per_step"] == 1.0 and r["grad_evals_per_step"] == 1.0
    assert r["ess_n"] == pytest.approx(r["ess"] * 10_000 / (1.0 * 200), rel=1e-6)
    assert 0 < r["ess"] <= 200 * math.log10(200)
    assert 0 <= r["accept_rate"] <= 1 and 0 <= r["burn_in_accept_rate"] <= 1 and r["ess_t"] > 0
    se = r["ess_std"] / math.sqrt(
        4
    )  # task.n_chains=4 (ESS_TINY)  # standard error of the mean over chains
    assert r["ess_se"] == pytest.approx(se, rel=1e-6) and 0 < se < r["ess"]
    assert r["ess_n_se"] == pytest.approx(r["ess_n"] * se / r["ess"], rel=1e-6)
    assert "ess_t_se" not in r  # its error is wall-time noise, which the chains do not measure
    assert r["ess_cv"] == pytest.approx(r["ess_std"] / r["ess"], rel=1e-6)
    assert 0 <= r["constant_chains"] <= 1
    rows = read_metrics(tmp_path / "lb" / "metrics.jsonl")
    assert [row["step"] for row in rows] == [50, 100, 150, 200, 250, 300]
    assert [row["burn_in"] for row in rows] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert len({row["step_size"] for row in rows[1:]}) == 1  # frozen after burn-in
    assert rows[-1]["step_size"] == r["step_size"]


@pytest.mark.slow
def test_sampler_ess_end_to_end_ab_and_gibbs_on_ordinal_target(tmp_path):
    """AB-1st adapts only within the task's burn-in (sync_burn_in), then runs its frozen
    kernel; Gibbs on {0..20}^d costs S - 1 = 20 queries per step."""
    common = [*ESS, "ab_target=rotated_medium", "model.dim=6", *ESS_TINY]
    ab = run_cli([*common, "sampler=ab_1st", "sampler.n_probe=10"], tmp_path / "ab").results
    assert ab["queries_per_step"] == 1.0 and ab["sigma"] > 0 and 0.5 <= ab["alpha"] < 1
    rows = read_metrics(tmp_path / "ab" / "metrics.jsonl")
    assert len({(row["sigma"], row["alpha"]) for row in rows if row["step"] >= 100}) == 1
    gibbs = run_cli([*common, "sampler=gibbs"], tmp_path / "gibbs").results
    assert gibbs["queries_per_step"] == 20.0
    assert gibbs["ess_n"] == pytest.approx(gibbs["ess"] * 10_000 / (20.0 * 200), rel=1e-6)


def test_sampler_ess_starts_from_another_runs_last_states(tmp_path):
    """init=run:<dir>: the chains start from that run's last checkpointed states; a missing
    run, a run with another number of chains and a run on another target are config errors."""
    from ebmlab.tasks.start_states import run_states
    from ebmlab.utils.workspace import Workspace

    first = [*ESS, "model.n_side=4", "sampler=gibbs", *ESS_TINY]
    run_cli(first, tmp_path / "a")
    last = Workspace(tmp_path / "a").load()["task"]["x"]
    task = from_conf("task/sampler_ess", init=f"run:{tmp_path / 'a'}", n_chains=4)
    model = from_conf("model/ising_lattice", n_side=4)
    torch.testing.assert_close(run_states(task.init_run, model, 4, "cpu"), last.float())
    with pytest.raises(ConfigError, match="must name a sampler_ess run directory"):
        from_conf("task/sampler_ess", init=f"run:{tmp_path / 'none'}")
    with pytest.raises(ConfigError, match="must be one of"):
        from_conf("task/sampler_ess", init="run:")
    with pytest.raises(ConfigError, match=r"needs \(3, 16\)"):
        run_states(task.init_run, model, 3, "cpu")
    with pytest.raises(ConfigError, match=r"needs \(4, 25\)"):
        run_states(task.init_run, from_conf("model/ising_lattice", n_side=5), 4, "cpu")
    r = run_cli([*first, f"task.init='run:{tmp_path / 'a'}'"], tmp_path / "b")
    assert r.results["ess_n"] > 0


def test_sampler_ess_rejects_a_learnable_model(tmp_path):
    p = run_cli(
        ["task=sampler_ess", "model=ising", "sampler=gibbs", *ESS_TINY],
        tmp_path / "bad",
        check=False,
    )
    assert p.returncode == 2 and "fixed target" in p.stderr


def test_sampler_ess_rejects_tuning_a_sampler_without_step_size(tmp_path):
    args = [*ESS, "model.n_side=4", "sampler=gibbs", "task.tune_accept=0.574", *ESS_TINY]
    p = run_cli(args, tmp_path / "bad", check=False)
    assert p.returncode == 2 and "step_size" in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [150, 300], ids=["mid_run", "after_last_checkpoint"])
def test_sampler_ess_resumes_bit_for_bit_after_a_kill(tmp_path, kill_at):
    """Killed during burn-in (resumes from step 100, mid-tuning) or after the last step
    (resumes straight into finish): every number but the timings is identical."""
    args = [
        *ESS,
        "model.n_side=4",
        "sampler=dmala",
        "task.tune_accept=0.574",
        "run.checkpoint_every=100",
        *ESS_TINY,
    ]
    full = run_cli(args, tmp_path / "full").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(args, tmp_path / "kill", env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "kill").results
    assert_same_results(resumed, full)  # bit-identical on a CPU, docs/gpu.md's rule on CUDA


def _count_calls(monkeypatch, counts: dict, cls, name: str, key: str) -> None:
    f = getattr(cls, name)

    def counted(self, *a, **k):
        counts[key] += 1
        return f(self, *a, **k)

    monkeypatch.setattr(cls, name, counted)


@pytest.mark.slow
@pytest.mark.parametrize(
    "sampler,kill_at,w_fits",
    [
        (["sampler=ab_shift", "sampler.n_probe=5"], 30, 1),  # checkpoint 20: collecting pairs
        (["sampler=ab_shift", "sampler.n_probe=5"], 70, 0),  # checkpoint 60: W fitted at 25
        (["sampler=dmala", "task.tune_accept=0.574"], 70, 0),  # checkpoint 60: tuning
    ],
    ids=["ab_collecting_pairs", "ab_adapting", "tune_accept"],
)
def test_sampler_ess_resumed_mid_warm_up_continues_it_and_reruns_none(
    tmp_path, monkeypatch, sampler, kill_at, w_fits
):
    """Killed inside the burn-in (100 steps, checkpoints every 20): the resumed run steps the
    adaptation only for the burn-in steps after its checkpoint, fits W at most once (only if
    the checkpoint came before it), and every number equals the uninterrupted run's."""
    from ebmlab.samplers.ab.adapt import ABAdaptation, BurnInW
    from ebmlab.samplers.acceptance_tuning import AcceptanceTuning

    args = [*ESS, "model.n_side=4", *sampler, *ESS_TINY, "run.checkpoint_every=20"]
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(args, tmp_path / "kill", env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    counts = {"warm_up_steps": 0, "w_fits": 0}
    for cls in (ABAdaptation, AcceptanceTuning):
        _count_calls(monkeypatch, counts, cls, "step", "warm_up_steps")
    _count_calls(monkeypatch, counts, BurnInW, "fit", "w_fits")
    assert run_inprocess(args, tmp_path / "kill", monkeypatch) == 0
    checkpoint = kill_at // 20 * 20
    assert counts == {"warm_up_steps": 100 - checkpoint, "w_fits": w_fits}
    counts.update(warm_up_steps=0, w_fits=0)
    assert run_inprocess(args, tmp_path / "full", monkeypatch) == 0
    assert counts == {"warm_up_steps": 100, "w_fits": int("sampler=ab_shift" in sampler)}
    resumed, full = (
        json.loads((tmp_path / d / "results.json").read_text()) for d in ("kill", "full")
    )
    assert_same_results(resumed["metrics"], full["metrics"])


OLD = ["model.n_side=4", "task.n_chains=4", "run.n_steps=300", "task.burn_in=200"]
OLD += ["run.eval_every=50", "run.checkpoint_every=40"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case,sampler",
    [
        ("ess_ab_shift", ["sampler=ab_shift", "sampler.n_probe=10"]),  # step 40: collecting pairs
        ("ess_rwm", ["sampler=rwm"]),  # step 120: tuning the radius
        ("ess_tune", ["sampler=dmala", "task.tune_accept=0.574"]),  # step 120: tuning the step
    ],
)
def test_a_checkpoint_of_the_code_before_issue_44_resumes_mid_burn_in(tmp_path, case, sampler):
    """tests/fixtures/checkpoints/<case>_4bfdce4.pt: the ``task`` entry of a checkpoint that
    the base commit's code wrote mid-burn-in. Today's code writes the same layout (plus the
    runner's step count), and the old entry resumed gives the uninterrupted run's numbers."""
    from ebmlab.utils.workspace import Workspace
    from tests.helpers import REPO
    from tests.tasks.test_old_checkpoints import layout

    old = torch.load(REPO / f"tests/fixtures/checkpoints/{case}_4bfdce4.pt", weights_only=True)
    args = [*ESS, *OLD, *sampler]
    run = tmp_path / "old"
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(old["step"])}
    assert run_cli(args, run, env=env, check=False).returncode != 0
    ws = Workspace(run)
    ckpt = ws.load("last")
    assert ckpt["_run"]["step"] == old["step"] and set(ckpt["task"]) == {*old["task"], "steps"}
    for k in ("sampler", "tuner", "summary", "x"):
        assert layout(ckpt["task"][k]) == layout(old["task"][k]), k
    ckpt["task"] = old["task"]  # what the old code wrote
    ws.save(ckpt, "last")
    assert_same_results(run_cli(args, run).results, run_cli(args, tmp_path / "new").results)


def test_the_task_declares_its_burn_in_as_the_warm_up():
    """sync_burn_in sets the warm-up of the adaptations that take one (AB's burn_in and the W
    it fits on a share of it, RWM's adapt_steps) through one method, no config key names."""
    from ebmlab.core.protocols import DeclaredWarmup

    ab, rwm = from_conf("sampler/ab_shift"), from_conf("sampler/rwm")
    assert isinstance(ab, DeclaredWarmup) and isinstance(rwm, DeclaredWarmup)
    assert not isinstance(from_conf("sampler/gibbs"), DeclaredWarmup)  # a plain kernel
    ab.set_warmup(40)
    rwm.set_warmup(0)
    assert ab.burn_in == 40 and ab.w.w_steps == 10 and rwm.done
    first = from_conf("sampler/ab_1st")
    first.set_warmup(0)
    assert first.done  # nothing left to adapt: frozen from the first step
    model = from_conf("model/ising_lattice", n_side=3)
    g = torch.Generator().manual_seed(0)
    state = ab.init(model, torch.zeros(2, 9))
    ab.step(model, state, g)
    with pytest.raises(RuntimeError, match="before the first step"):
        ab.set_warmup(10)


def test_per_chain_ess_reports_spread_and_chains_that_never_moved():
    """Two of four chains never change their statistic (each counted as ESS 1); the other two
    are i.i.d. noise (ESS near the number of steps). The mean alone would hide that."""
    from ebmlab.metrics.ess import per_chain_ess

    g = torch.Generator().manual_seed(0)
    n = 2000
    summary = torch.cat([torch.full((n, 2), 94.0), torch.randn(n, 2, generator=g)], 1)
    out = per_chain_ess(summary)
    ess = ess_1d(summary)
    assert out["constant_chains"] == 0.5
    assert ess[0] == ess[1] == 1.0 and float(ess[2:].min()) > 0.5 * n
    assert out["ess"] == pytest.approx(float(ess.mean()))
    assert out["ess_cv"] == pytest.approx(float(ess.std() / ess.mean()))
    assert out["ess_cv"] > 0.9
    moving = per_chain_ess(torch.randn(n, 4, generator=g))
    assert moving["constant_chains"] == 0.0 and moving["ess_cv"] < 0.3
