"""Deep-EBM learning (DLP Table 1; ACS Table 2): the ResNet energy, AIS with a kernel on the
tempered density against exact enumeration, replay-buffer PCD with EMA, and the ebm_learning
task end to end (best checkpoint, kill/resume, divergence)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.learning.pcd_buffer import PCDBuffer
from ebmlab.metrics.ais import ais_log_z, linear_betas
from ebmlab.metrics.tempered_ais import tempered_ais_log_z
from ebmlab.models.resnet_ebm import ResNetEBM, TemperedEBM
from ebmlab.samplers.base import ChainState
from ebmlab.samplers.dlp import DMALA
from ebmlab.samplers.gwg import GWG
from ebmlab.utils.logging import read_metrics
from tests.helpers import check_before_compute, from_conf, run_cli, run_inprocess


def resnet(**kw) -> ResNetEBM:
    """conf/model/resnet_ebm.yaml on 28x28 images (``kw`` overrides)."""
    return from_conf("model/resnet_ebm", **{"dim": 784, **kw})


def buffer_learner(**kw) -> PCDBuffer:
    """conf/learner/pcd_buffer.yaml (``kw`` overrides)."""
    return from_conf("learner/pcd_buffer", **kw)


def tiny_model(seed: int = 0) -> ResNetEBM:
    """A 12-pixel (3x4) ResNet EBM whose network output varies by a few nats."""
    torch.manual_seed(seed)
    m = resnet(n_channels=4, n_blocks=1, dim=12, image_shape=[3, 4])
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Conv2d):
                mod.weight.mul_(3.0)
        m.out.weight.mul_(4.0)
    g = torch.Generator().manual_seed(seed + 1)
    m.set_base_mean(torch.rand(12, generator=g) * 0.8 + 0.1)
    return m


def all_states(d: int) -> torch.Tensor:
    idx = torch.arange(2**d)
    return ((idx[:, None] >> torch.arange(d)) & 1).float()


def test_resnet64_has_about_600k_parameters_and_shapes():
    m = resnet()
    n = sum(p.numel() for p in m.parameters())
    assert 590_000 < n < 610_000  # PROTOCOLS.md: "about 600k"
    assert sum(p.numel() for p in resnet(n_channels=16, n_blocks=2).parameters()) < 25_000
    x = (torch.rand(3, 784) < 0.5).float()
    assert m.log_prob(x).shape == (3,) and m.log_prob(x.reshape(3, 28, 28)).shape == (3,)


def test_bad_model_args_name_the_key():
    with pytest.raises(ConfigError, match="image_shape"):
        resnet(image_shape=[28, 27])
    with pytest.raises(ConfigError, match="base_eps"):
        resnet(base_eps=0.7)
    with pytest.raises(ConfigError, match="batch_size"):
        buffer_learner(buffer_size=10, batch_size=20)


def test_base_is_normalised_and_log_prob_is_net_plus_base():
    m = tiny_model()
    x = all_states(12)
    with torch.no_grad():
        assert abs(float(torch.logsumexp(m.base_log_prob(x).double(), 0))) < 1e-5
        torch.testing.assert_close(m.log_prob(x), m.net(x) + m.base_log_prob(x))
        # base mean is the clamped data mean
        mean = torch.zeros(12)
        mean[0] = 1.0
        m.set_base_mean(mean)
        assert torch.allclose(m.base_mean[:2], torch.tensor([0.99, 0.01]), atol=1e-6)


def test_tempered_model_gradient_matches_autograd():
    m = tiny_model()
    t = TemperedEBM(m, beta=0.3)
    x = (torch.rand(5, 12) < 0.5).float()
    lp, g = t.log_prob_and_grad(x)
    xg = x.clone().requires_grad_(True)
    ref = m.base_log_prob(xg) + 0.3 * m.net(xg)
    (gr,) = torch.autograd.grad(ref.sum(), xg)
    torch.testing.assert_close(lp, ref.detach())
    torch.testing.assert_close(g, gr)


@pytest.mark.parametrize(
    "sampler",
    [GWG(1), pytest.param(DMALA(step_size=0.5, precond=None), marks=pytest.mark.slow)],
    ids=["gwg", "dmala"],
)
def test_ais_log_z_matches_enumeration(sampler):
    m = tiny_model()
    with torch.no_grad():
        exact = float(torch.logsumexp(m.log_prob(all_states(12)).double(), 0))
        spread = float(m.net(all_states(12)).std())
    assert spread > 1.0  # the network reshapes the base density noticeably
    g = torch.Generator().manual_seed(0)
    res = tempered_ais_log_z(TemperedEBM(m), sampler, linear_betas(200), 200, g, False)
    # Monte Carlo noise floor from the sample (delta-method stderr) plus a small AIS bias allowance
    assert abs(res.log_z - exact) < 4 * res.log_z_stderr + 0.05, (res.log_z, exact)


def test_cached_ais_equals_uncached_reference():
    """Carrying the network's value/gradient across temperatures changes nothing."""
    m = tiny_model(seed=3)
    betas = linear_betas(40)
    g = torch.Generator().manual_seed(5)
    cached = tempered_ais_log_z(TemperedEBM(m), GWG(1), betas, 16, g, False)
    sampler = GWG(1)

    def transition(x, beta, gen):
        t = TemperedEBM(m, beta)
        lp, gr = t.log_prob_and_grad(x)
        return sampler.step(t, ChainState(x=x, log_prob=lp, grad=gr), gen)[0].x

    ref = ais_log_z(
        lambda n, gen: m.sample_base(n, gen),
        m.base_log_prob,
        m.log_prob,
        transition,
        betas,
        16,
        torch.Generator().manual_seed(5),
    )
    torch.testing.assert_close(cached.log_weights, ref.log_weights, rtol=0, atol=1e-4)


def test_learner_warmup_ema_and_state_round_trip():
    g = torch.Generator().manual_seed(0)
    m = tiny_model()
    learner = buffer_learner(buffer_size=20, batch_size=5, sampler_steps=2, lr=1e-2, warmup_iters=4)
    data = (torch.rand(5, 12, generator=g) < 0.5).float()
    learner.setup(m, data, g, DMALA(0.3, None))
    assert learner.buffer.shape == (20, 12)
    before = [p.detach().clone() for p in m.parameters()]
    ema_before = [p.detach().clone() for p in learner.ema_model.parameters()]
    info = learner.update(m, data, g)
    assert info["lr"] == pytest.approx(1e-2 / 4) and info["n_grad"] == 3  # init + 2 steps
    for pe0, p0, p, pe in zip(ema_before, before, m.parameters(), learner.ema_model.parameters()):
        assert torch.allclose(pe0, p0)
        torch.testing.assert_close(pe, 0.999 * p0 + 0.001 * p.detach())
    for _ in range(4):
        info = learner.update(m, data, g)
    assert info["lr"] == pytest.approx(1e-2)
    sd = learner.state_dict()
    other = buffer_learner(buffer_size=20, batch_size=5, sampler_steps=2, lr=1e-2, warmup_iters=4)
    m2 = tiny_model(seed=9)
    m2.load_state_dict(m.state_dict())
    other.setup(m2, data, torch.Generator().manual_seed(1), DMALA(0.3, None))
    other.load_state_dict(sd)
    assert torch.equal(other.buffer, learner.buffer) and other.iteration == 5
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a, b = learner.step(m, g1), other.step(m2, g2)
    assert a == b
    for p, q in zip(learner.ema_model.parameters(), other.ema_model.parameters()):
        assert torch.equal(p, q)


def test_learner_divergence_raises_with_step():
    g = torch.Generator().manual_seed(0)
    m = tiny_model()
    learner = buffer_learner(buffer_size=8, batch_size=4, sampler_steps=1)
    data = (torch.rand(4, 12, generator=g) < 0.5).float()
    learner.setup(m, data, g, GWG(1))
    learner.step(m, g)
    with torch.no_grad():
        m.out.bias.fill_(float("nan"))
    learner.step(m, g)  # nothing read back: recorded on the device, raised when checked
    learner.step(m, g)
    with pytest.raises(DivergenceError, match="step 2"):
        learner.check_divergence()


def test_acs_pcd_schedule_in_replay_buffer():
    g = torch.Generator().manual_seed(0)
    m = tiny_model()
    s = from_conf("sampler/acs", tune=False, alpha_candidates=5)
    acs = {"cycle_length": 3, "tune_budget": 5}  # learner.acs: Algorithm 6's settings
    learner = buffer_learner(buffer_size=12, batch_size=6, sampler_steps=4, acs=acs)
    data = (torch.rand(6, 12, generator=g) < 0.5).float()
    learner.setup(m, data, g, s)
    infos = [learner.update(m, data, g) for _ in range(4)]
    assert learner.acs_schedule
    # iterations 0 and 1 re-tune (budget 5 + init), iteration 3 explores with 4 // 2 steps
    assert infos[0]["n_grad"] == 6 and infos[1]["n_grad"] == 6
    assert infos[2]["n_grad"] == 5 and infos[3]["n_grad"] == 3


# ------------------------------------------------------------------------ end to end (CLI)


def test_task_config_errors_name_the_key():
    args = ["experiment=dlp/table1_ebm_learning", "run.eval_every=100", "task.valid_every=150"]
    with pytest.raises(ConfigError, match="task.valid_every: must be 0 or a multiple of run.eval"):
        check_before_compute(args)
    with pytest.raises(ConfigError, match="ais_step_size"):
        from_conf("task/ebm_learning", ais_sampler="dmala", ais_step_size=0.0)


def test_ebm_learning_end_to_end(trained_ebm):
    d, r = trained_ebm
    assert math.isfinite(r["test_ll"]) and r["test_ll"] < 0
    assert r["n_iters"] == 12 and r["diverged_at"] == 0 and r["final_model"] == "best"
    assert r["best_step"] in (6, 12) and r["log_prob_evals_per_step"] == 2
    assert (d / "checkpoints" / "best.pt").exists() and (d / "checkpoints" / "last.pt").exists()
    assert (d / "figures" / "buffer.png").exists() and (d / "figures" / "valid_ll.png").exists()
    rows = read_metrics(d / "metrics.jsonl")
    valid = [row for row in rows if "valid_ll" in row]
    assert [row["step"] for row in valid] == [6, 12]
    assert r["best_valid_ll"] == max(row["valid_ll"] for row in valid)
    # best.pt: the weights ebm_mixing loads (model, learner["ema"]) and where they come from
    best = torch.load(d / "checkpoints" / "best.pt", weights_only=True)
    assert best["step"] == r["best_step"] and best["valid_ll"] == r["best_valid_ll"]
    assert set(best["learner"]["ema"]) == set(best["model"])


@pytest.mark.slow  # two more CLI runs per case (~15 s of CPU)
@pytest.mark.parametrize("kill_at", [10, 12], ids=["mid_run", "after_last_checkpoint"])
def test_ebm_learning_resume_after_sigkill_is_exact(trained_ebm, ebm_tiny_args, tmp_path, kill_at):
    clean_dir, clean = trained_ebm
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(ebm_tiny_args, tmp_path / "killed", check=False, env=env)
    assert killed.returncode == -9, killed.stderr
    assert not (tmp_path / "killed" / "results.json").exists()
    resumed = run_cli(ebm_tiny_args, tmp_path / "killed").results
    timing = {"seconds", "time_per_iter", "ais_seconds"}
    assert {k: v for k, v in resumed.items() if k not in timing} == {
        k: v for k, v in clean.items() if k not in timing
    }

    def rows(d):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in read_metrics(d)]

    assert rows(tmp_path / "killed" / "metrics.jsonl") == rows(clean_dir / "metrics.jsonl")
    a = torch.load(clean_dir / "checkpoints" / "last.pt", weights_only=True)["task"]
    b = torch.load(tmp_path / "killed" / "checkpoints" / "last.pt", weights_only=True)["task"]
    assert torch.equal(a["learner"]["buffer"], b["learner"]["buffer"])
    for k, v in a["learner"]["ema"].items():
        assert torch.equal(v, b["learner"]["ema"][k])
    sa, sb = a["learner"]["optimizer"]["state"], b["learner"]["optimizer"]["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)


def test_divergence_stops_training_and_keeps_good_checkpoints(
    ebm_tiny_args, tmp_path, monkeypatch, capsys
):
    """A NaN at iteration 11 stops training; last.pt stays at step 8, best.pt at step 6, and
    the best checkpoint is evaluated (on_divergence=evaluate_best)."""
    original = PCDBuffer.update

    def step(self, model, batch, generator):
        if self.iteration == 10:
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))
        return original(self, model, batch, generator)

    monkeypatch.setattr(PCDBuffer, "update", step)
    run_dir = tmp_path / "run"
    assert run_inprocess(ebm_tiny_args, run_dir, monkeypatch) == 0
    err = capsys.readouterr().err
    assert "diverged at step 11" in err and "step 8" in err
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert last["_run"]["step"] == 8 and best["step"] == 6
    assert all(torch.isfinite(v).all() for v in last["task"]["model"].values())
    r = json.loads((run_dir / "results.json").read_text())["metrics"]
    assert r["diverged_at"] == 11 and r["final_model"] == "best" and math.isfinite(r["test_ll"])
    assert r["n_iters"] == 10 and r["best_step"] == 6
