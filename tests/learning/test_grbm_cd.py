"""Modified CD for GRBMs (Alg. 3-4): learning on the 2-D GMM toy improves the exact held-out
log-likelihood, negatives are every step of a chain started from noise, clipping, cosine LR,
divergence detection."""

import math

import pytest
import torch

from ebmlab.data.gmm_toy import gmm_toy
from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.learning.grbm_cd import GRBMModifiedCD, cosine_lr, sample_from_noise
from ebmlab.models.grbm import GRBM
from ebmlab.samplers.grbm import GRBMGibbs, GRBMGibbsLangevin, GRBMLangevin
from tests.helpers import from_conf


def cd_learner(**kw) -> GRBMModifiedCD:
    """conf/learner/grbm_cd.yaml with ``kw`` merged in; its ``n_epochs`` follows the run's
    length (``${run.n_steps}``), the GMM toy's 50,000 unless ``kw`` says."""
    return from_conf("learner/grbm_cd", **{"n_epochs": 50000, **kw})


pytestmark = pytest.mark.usefixtures("one_thread")


def heldout_ll(m: GRBM, x: torch.Tensor) -> float:
    """Exact average log-likelihood: log Z by quadrature on a 2-D grid."""
    with torch.no_grad():
        return float(m.log_prob(x).mean().double() - m.log_partition_grid(-16, 16, 161))


@pytest.mark.parametrize(
    "sampler,variant",
    [
        (from_conf("sampler/grbm_gibbs_langevin", step_size=0.5, n_inner=4), "joint"),
        (from_conf("sampler/grbm_langevin", step_size=0.5), "marginal"),
    ],
    ids=["gibbs-langevin-joint", "langevin-marginal"],
)
def test_modified_cd_improves_heldout_loglik_on_gmm(sampler, variant):
    g = torch.Generator().manual_seed(1234)
    train, test = gmm_toy("iso", 1000, g), gmm_toy("iso", 1000, g)
    m = from_conf("model/grbm", n_visible=2, n_hidden=16)
    m.reset_parameters(torch.Generator().manual_seed(0))
    learner = cd_learner(cd_steps=10)
    assert learner.resolve_variant(sampler) == variant
    before = heldout_ll(m, test)
    n_updates = 60
    for i in range(n_updates):
        batch = train[torch.randint(0, 1000, (100,), generator=g)]
        out = learner.cd_update(m, batch, sampler, g, progress=i / n_updates)
    after = heldout_ll(m, test)
    # before: about -20 nats (N(0, I) against modes at distance 5-7); the truth is -3.96
    assert before < -15 and after > before + 6, (before, after)
    assert 0.0 < out["accept_rate"] <= 1.0 and math.isfinite(out["grad_norm"])
    assert learner.n_updates == n_updates


def test_step_makes_the_same_draws_as_an_epoch_loop():
    """``step`` (one mini-batch, the epoch's permutation drawn at its start, cosine LR and the
    MH-off warm-up by epoch) equals ``train_epoch`` epoch after epoch; a checkpoint taken
    mid-epoch resumes the same sequence."""
    x = torch.randn(130, 2, generator=torch.Generator().manual_seed(3)) * 3
    sampler = GRBMGibbsLangevin(0.1, 3, 0, "cosine", True, "none")
    kw = {"cd_steps": 4, "batch_size": 40, "n_epochs": 3, "mh_off_epochs": 1}
    params = []
    for by_step in (True, False):
        m = from_conf("model/grbm", n_visible=2, n_hidden=5)
        m.reset_parameters(torch.Generator().manual_seed(0))
        learner, g = cd_learner(**kw), torch.Generator().manual_seed(7)
        if by_step:
            learner.setup(m, x, g, sampler, lambda b, _: b / 2)
            assert learner.n_steps == 9
            lrs = [float(learner.step(m, g)["lr"]) for _ in range(learner.n_steps)]
            assert lrs[::3] == [cosine_lr(learner.lr, e / 3) for e in range(3)]
        else:
            for e in range(3):
                learner.train_epoch(m, x, 40, sampler, g, e / 3, e >= 1, lambda b: b / 2)
        params.append([p.detach().clone() for p in m.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*params))
    # resume mid-epoch from a state dict
    m = from_conf("model/grbm", n_visible=2, n_hidden=5)
    m.reset_parameters(torch.Generator().manual_seed(0))
    learner, g = cd_learner(**kw), torch.Generator().manual_seed(7)
    learner.setup(m, x, g, sampler, lambda b, _: b / 2)
    for _ in range(4):
        learner.step(m, g)
    other = cd_learner(**kw)
    other.setup(m, x, torch.Generator(), sampler, lambda b, _: b / 2)
    other.load_state_dict(learner.state_dict())
    assert other.epoch == 1 and other.n_updates == 4
    g2 = torch.Generator().manual_seed(11)
    g.manual_seed(11)
    m2 = from_conf("model/grbm", n_visible=2, n_hidden=5)
    m2.load_state_dict(m.state_dict())
    a, b = learner.step(m, g), other.step(m2, g2)
    assert torch.equal(a["grad_norm"], b["grad_norm"])


def test_negatives_are_all_steps_of_a_noise_chain():
    m = from_conf("model/grbm", n_visible=3, n_hidden=5)
    m.reset_parameters(torch.Generator().manual_seed(0))
    s = from_conf("sampler/grbm_gibbs_langevin", step_size=0.3, n_inner=2)
    learner = cd_learner(cd_steps=4, burn_in=1)
    v, h, _ = learner.negative_samples(m, s, (6, 3), torch.Generator().manual_seed(9))
    assert v.shape == (18, 3) and h.shape == (18, 5)
    # the same chain by hand: v0 ~ N(0, I), then 4 steps, keep steps 2..4
    g = torch.Generator().manual_seed(9)
    state = s.init(m, torch.randn((6, 3), generator=g))
    xs, hs = [], []
    for t in range(4):
        state, _ = s.step(m, state, g)
        if t >= 1:
            xs.append(state.x)
            hs.append(state.extra["h"])
    torch.testing.assert_close(v, torch.cat(xs))
    torch.testing.assert_close(h, torch.cat(hs))


def test_positive_and_negative_phases_enter_with_the_right_sign():
    """With a Gibbs chain that has reached the model, E[grad] ~ 0; with data far from the
    model, the mu-gradient points from the data toward the model mean (descent moves mu to
    the data)."""
    m = from_conf("model/grbm", n_visible=2, n_hidden=3)
    m.reset_parameters(torch.Generator().manual_seed(0))
    learner = cd_learner(cd_steps=5, lr=0.1, grad_clip=0.0)
    g = torch.Generator().manual_seed(0)
    batch = torch.full((200, 2), 3.0)
    mu0 = m.mu.detach().clone()
    learner.cd_update(m, batch, GRBMGibbs(), g, progress=0.0)
    assert (m.mu.detach() - mu0 > 0).all()


def test_gradient_clipping_bounds_the_update():
    m = from_conf("model/grbm", n_visible=2, n_hidden=8)
    m.reset_parameters(torch.Generator().manual_seed(0))
    before = {k: p.detach().clone() for k, p in m.named_parameters()}
    learner = cd_learner(cd_steps=3, lr=1.0, grad_clip=1e-3)
    batch, g = torch.full((50, 2), 5.0), torch.Generator().manual_seed(0)
    out = learner.cd_update(m, batch, GRBMGibbs(), g, progress=0.0)
    assert out["grad_norm"] > 1.0
    delta = torch.sqrt(sum(((p.detach() - before[k]) ** 2).sum() for k, p in m.named_parameters()))
    assert abs(float(delta) - 1e-3) < 1e-6


def test_cosine_lr():
    assert cosine_lr(0.01, 0.0) == 0.01
    assert abs(cosine_lr(0.01, 0.5) - 0.005) < 1e-12
    assert abs(cosine_lr(0.01, 1.0)) < 1e-12
    assert cosine_lr(0.01, 1.5) == cosine_lr(0.01, 1.0)


def test_divergence_is_detected_and_parameters_kept():
    m = from_conf("model/grbm", n_visible=2, n_hidden=4)
    m.reset_parameters(torch.Generator().manual_seed(0))
    before = {k: p.detach().clone() for k, p in m.named_parameters()}
    learner = cd_learner(cd_steps=2, lr=1e38, grad_clip=0.0)
    batch = torch.full((20, 2), 1e3)
    with pytest.raises(DivergenceError, match="step 1: parameter"):
        learner.cd_update(m, batch, GRBMGibbs(), torch.Generator().manual_seed(0), progress=0.0)
    for k, p in m.named_parameters():
        assert torch.equal(p.detach(), before[k])
    assert learner.n_updates == 0
    # a NaN in the model makes the negative chain non-finite
    with torch.no_grad():
        m.log_var[0] = float("nan")
    with pytest.raises(DivergenceError, match="negative samples"):
        cd_learner(cd_steps=2).cd_update(
            m, torch.zeros(4, 2), GRBMGibbs(), torch.Generator().manual_seed(0), 0.0
        )


def test_sample_from_noise_displays_conditional_mean():
    m = from_conf("model/grbm", n_visible=2, n_hidden=3)
    m.reset_parameters(torch.Generator().manual_seed(0))
    v, shown = sample_from_noise(
        m, from_conf("sampler/grbm_gibbs_langevin", n_inner=2), 7, 5, torch.Generator()
    )
    assert v.shape == shown.shape == (7, 2)
    # every displayed point is W h + mu for a binary h
    _, means = m.mixture()
    dist = torch.cdist(shown.detach(), means.detach()).min(1).values
    assert (dist < 1e-5).all()


def test_config_validation():
    with pytest.raises(ConfigError, match="variant"):
        cd_learner(variant="both")
    with pytest.raises(ConfigError, match="cd_steps"):
        cd_learner(cd_steps=0)
    with pytest.raises(ConfigError, match="burn_in"):
        cd_learner(cd_steps=5, burn_in=5)
    with pytest.raises(ConfigError, match="grad_clip"):
        cd_learner(grad_clip=-1.0)
    with pytest.raises(ConfigError, match="mh_off_epochs"):
        cd_learner(mh_off_epochs=-1)
    with pytest.raises(ConfigError, match="batch_size"):
        cd_learner(batch_size=20).setup(None, torch.zeros(10, 2), torch.Generator(), GRBMGibbs())


def test_yaml_configs_instantiate():
    from pathlib import Path

    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf"
    cfg = OmegaConf.load(conf / "model/grbm.yaml")
    cfg.n_visible = 2
    model = instantiate(cfg, n_hidden=3)
    assert isinstance(model, GRBM)
    for name, cls in [
        ("grbm_gibbs", GRBMGibbs),
        ("grbm_langevin", GRBMLangevin),
        ("grbm_gibbs_langevin", GRBMGibbsLangevin),
    ]:
        s = instantiate(OmegaConf.load(conf / f"sampler/{name}.yaml"))
        assert isinstance(s, cls)
        assert getattr(s, "energy_scale", "none") == "none" and s.exact
    learner = instantiate(
        OmegaConf.merge(OmegaConf.load(conf / "learner/grbm_cd.yaml"), {"n_epochs": 2})
    )
    assert learner.cd_steps == 100 and learner.lr == 0.01 and learner.grad_clip == 10.0
