import importlib.util

import numpy as np
import pytest
import scipy.linalg
import torch
from torch import nn

from ebmlab.metrics.fid import (
    INCEPTION_WEIGHTS_ENV,
    FeatureFID,
    feature_frechet_distance,
    frechet_distance,
    inception_fid,
)


def _torchmetrics_fid_error():
    try:
        import torchmetrics.image.fid  # noqa: F401
    except Exception as e:  # e.g. a torchvision build that does not match torch
        return f"torchmetrics FID not importable: {type(e).__name__}: {e}"
    return None


needs_torchmetrics = pytest.mark.skipif(
    _torchmetrics_fid_error() is not None, reason=str(_torchmetrics_fid_error())
)


def _random_cov(k, rng):
    a = rng.standard_normal((k, k))
    return a @ a.T / k + 0.1 * np.eye(k)


def test_diagonal_closed_form():
    rng = np.random.default_rng(0)
    mu1, mu2 = rng.standard_normal(5), rng.standard_normal(5)
    s1, s2 = rng.uniform(0.1, 3, 5), rng.uniform(0.1, 3, 5)
    expected = ((mu1 - mu2) ** 2).sum() + ((np.sqrt(s1) - np.sqrt(s2)) ** 2).sum()
    got = frechet_distance(mu1, np.diag(s1), mu2, np.diag(s2))
    assert got == pytest.approx(expected, rel=1e-10)


def test_commuting_covariances_closed_form():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    a, b = rng.uniform(0.05, 4, 6), rng.uniform(0.05, 4, 6)
    s1, s2 = q @ np.diag(a) @ q.T, q @ np.diag(b) @ q.T
    mu = rng.standard_normal(6)
    expected = (mu**2).sum() + ((np.sqrt(a) - np.sqrt(b)) ** 2).sum()
    assert frechet_distance(mu, s1, np.zeros(6), s2) == pytest.approx(expected, rel=1e-9)


def test_identical_is_zero_and_general_case_matches_sqrtm():
    rng = np.random.default_rng(2)
    k = 8
    s1, s2 = _random_cov(k, rng), _random_cov(k, rng)
    mu1, mu2 = rng.standard_normal(k), rng.standard_normal(k)
    assert frechet_distance(mu1, s1, mu1, s1) == pytest.approx(0.0, abs=1e-10)
    ref = (
        ((mu1 - mu2) ** 2).sum()
        + np.trace(s1)
        + np.trace(s2)
        - 2 * np.trace(scipy.linalg.sqrtm(s1 @ s2)).real
    )
    assert frechet_distance(mu1, s1, mu2, s2) == pytest.approx(ref, rel=1e-8)
    # symmetric in its arguments, accepts torch tensors
    t = [torch.from_numpy(a) for a in (mu2, s2, mu1, s1)]
    assert frechet_distance(*t) == pytest.approx(ref, rel=1e-8)
    # rank-deficient covariance (fewer samples than features) stays finite and >= 0
    f = rng.standard_normal((4, k))
    sing = np.cov(f, rowvar=False)
    assert 0.0 <= frechet_distance(mu1, sing, mu2, s2) < np.inf
    with pytest.raises(ValueError, match="shape mismatch"):
        frechet_distance(mu1, s1, mu2[:3], s2)


def test_feature_frechet_distance_uses_mean_and_unbiased_cov():
    rng = np.random.default_rng(3)
    real = rng.standard_normal((200, 4))
    fake = rng.standard_normal((150, 4)) * 1.5 + 0.3
    expected = frechet_distance(
        real.mean(0), np.cov(real, rowvar=False), fake.mean(0), np.cov(fake, rowvar=False)
    )
    assert feature_frechet_distance(real, fake) == pytest.approx(expected, rel=1e-12)
    assert feature_frechet_distance(torch.from_numpy(real), real) == pytest.approx(0.0, abs=1e-10)
    with pytest.raises(ValueError, match="n >= 2"):
        feature_frechet_distance(real[:1], fake)


class _Features(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("w", torch.randn(2 * 6 * 6, 5, generator=g) / 8)

    def forward(self, x):
        return torch.tanh(x.flatten(1) @ self.w)


@needs_torchmetrics
@pytest.mark.parametrize("how", ["num_features", "probe"])
def test_feature_fid_agrees_with_frechet_distance(gen, how):
    net = _Features()
    real = torch.rand(300, 2, 6, 6, generator=gen)
    fake = torch.rand(250, 2, 6, 6, generator=gen) ** 2
    kw = {"num_features": 5} if how == "num_features" else {"input_shape": (2, 6, 6)}
    fid = FeatureFID(net, **kw)
    for s in range(0, 300, 100):
        fid.update(real[s : s + 100], real=True)
    fid.update(fake, real=False)
    with torch.no_grad():
        expected = feature_frechet_distance(net(real), net(fake))
    assert expected > 0.05
    assert fid.compute() == pytest.approx(expected, rel=1e-4)
    fid.reset()
    fid.update(real, real=True)
    fid.update(real, real=False)
    assert fid.compute() == pytest.approx(0.0, abs=1e-5)


def test_feature_fid_needs_a_width():
    with pytest.raises(ValueError, match="num_features or input_shape"):
        FeatureFID(nn.Flatten())


def test_inception_fid_without_weights_fails_fast(tmp_path, monkeypatch):
    imgs = torch.rand(4, 1, 28, 28)
    monkeypatch.delenv(INCEPTION_WEIGHTS_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        inception_fid(imgs, imgs, weights_path=None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        inception_fid(imgs, imgs, weights_path=str(tmp_path / "missing.pth"))
    monkeypatch.setenv(INCEPTION_WEIGHTS_ENV, str(tmp_path / "also_missing.pth"))
    with pytest.raises(FileNotFoundError, match="also_missing"):
        inception_fid(imgs, imgs, weights_path=None)


@pytest.mark.skipif(
    importlib.util.find_spec("torch_fidelity") is not None, reason="torch-fidelity installed"
)
def test_inception_fid_reports_missing_torch_fidelity(tmp_path):
    w = tmp_path / "pt_inception-2015-12-05-6726825d.pth"
    w.write_bytes(b"not really weights")
    imgs = torch.rand(4, 1, 28, 28)
    with pytest.raises(ModuleNotFoundError, match="torch-fidelity"):
        inception_fid(imgs, imgs, weights_path=str(w))
