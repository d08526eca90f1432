"""The feature classifier behind fid_<dataset>_features and its Frechet distance."""

import math

import pytest
import torch

from ebmlab.metrics.feature_net import (
    FeatureExtractor,
    FeatureNet,
    _torchmetrics_ok,
    accuracy,
    cache_path,
    cached_feature_net,
    feature_fid,
    train_feature_net,
)
from ebmlab.metrics.fid import FeatureFID, feature_frechet_distance


def _toy_images(n: int, g: torch.Generator):
    """Two classes of 8x8 images: bright top half (0) or bright bottom half (1), plus noise."""
    y = torch.randint(0, 2, (n,), generator=g)
    x = 0.1 * torch.rand(n, 1, 8, 8, generator=g)
    x[y == 0, :, :4] += 0.8
    x[y == 1, :, 4:] += 0.8
    return x.clamp(0, 1), y


def test_classifier_learns_and_is_deterministic():
    x, y = _toy_images(512, torch.Generator().manual_seed(0))
    nets = [
        train_feature_net(x, y, torch.Generator().manual_seed(3), epochs=2, batch_size=64, width=4)
        for _ in range(2)
    ]
    xt, yt = _toy_images(256, torch.Generator().manual_seed(1))
    assert accuracy(nets[0], xt, yt) > 0.95
    for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values()):
        assert torch.equal(a, b)
    f = nets[0].features(xt)
    assert f.shape == (256, 128) and (f >= 0).all()


def test_cache_trains_once_and_loads_weights_only(tmp_path):
    x, y = _toy_images(128, torch.Generator().manual_seed(0))
    calls = []

    def fit():
        calls.append(1)
        net = train_feature_net(x, y, torch.Generator().manual_seed(0), epochs=1, width=4)
        return net, {"train_accuracy": accuracy(net, x, y)}

    key = {"dataset": "toy", "n": 128}
    net1, info1, cached1 = cached_feature_net(tmp_path, key, fit)
    net2, info2, cached2 = cached_feature_net(tmp_path, key, fit)
    assert (cached1, cached2) == (False, True) and len(calls) == 1
    assert info1 == info2
    assert torch.equal(net1.features(x), net2.features(x))
    blob = torch.load(cache_path(tmp_path, key), weights_only=True)
    assert blob["arch"]["width"] == 4
    _, _, cached3 = cached_feature_net(tmp_path, {**key, "n": 127}, fit)
    assert cached3 is False and len(calls) == 2  # another key -> another file


def test_feature_fid_direct_matches_explicit_features_and_is_zero_on_itself():
    g = torch.Generator().manual_seed(0)
    net = FeatureNet(1, 8, 2, width=4, feature_dim=16, generator=g)
    a, _ = _toy_images(300, g)
    b = (a + 0.3 * torch.rand(a.shape, generator=g)).clamp(0, 1)
    d, backend = feature_fid(net, a, b, batch_size=64, backend="direct")
    assert backend == "direct"
    with torch.no_grad():
        expected = feature_frechet_distance(net.features(a), net.features(b))
    assert d == pytest.approx(expected, rel=1e-9)
    assert d > 1e-3
    assert feature_fid(net, a, a, backend="direct")[0] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.skipif(not _torchmetrics_ok(), reason="torchmetrics FID not importable")
def test_torchmetrics_backend_agrees_with_direct():
    g = torch.Generator().manual_seed(1)
    net = FeatureNet(1, 8, 2, width=4, feature_dim=16, generator=g)
    a, _ = _toy_images(400, g)
    b = (0.5 * a + 0.4 * torch.rand(a.shape, generator=g)).clamp(0, 1)
    direct, _ = feature_fid(net, a, b, backend="direct")
    tm, backend = feature_fid(net, a, b, batch_size=128, backend="torchmetrics")
    assert backend == "torchmetrics"
    assert tm == pytest.approx(direct, rel=1e-3, abs=1e-5)


class _Identity(torch.nn.Module):
    num_features = 4

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


@pytest.mark.skipif(not _torchmetrics_ok(), reason="torchmetrics FID not importable")
def test_feature_fid_of_gaussians_matches_closed_form():
    """Identity features of N(0, I) vs N(m, diag(s^2)) in 4-d: d^2 = |m|^2 + sum (1 - s)^2.
    Sampling error of the plug-in estimate is O(k / n); n = 40,000 gives a few 1e-3."""
    g = torch.Generator().manual_seed(2)
    n = 40_000
    m = torch.tensor([0.5, -0.3, 0.0, 0.2])
    s = torch.tensor([1.0, 0.5, 2.0, 1.5])
    real = torch.randn(n, 1, 2, 2, generator=g, dtype=torch.float64)
    fake = (m + s * torch.randn(n, 4, generator=g, dtype=torch.float64)).reshape(n, 1, 2, 2)
    expected = float((m**2).sum() + ((1 - s) ** 2).sum())
    metric = FeatureFID(_Identity())
    metric.update(real.float(), real=True)
    metric.update(fake.float(), real=False)
    got = metric.compute()
    assert math.isfinite(got)
    assert got == pytest.approx(expected, abs=0.03)


def test_feature_extractor_declares_width():
    net = FeatureNet(3, 32, 5, width=4, feature_dim=32)
    fx = FeatureExtractor(net)
    assert fx.num_features == 32
    assert fx(torch.rand(2, 3, 32, 32)).shape == (2, 32)


def test_mnist_classifier_on_real_test_split(shared_data):
    from tests.helpers import from_conf

    ds = from_conf("dataset/mnist_gray", data_dir=str(shared_data), cache_dir=None)
    x, y = ds.load("test[:2000]")
    xr, yr = ds.load("test[5000:6000]")
    net = train_feature_net(x.float() / 255, y, torch.Generator().manual_seed(0), epochs=4)
    assert accuracy(net, xr.float() / 255, yr) > 0.85
    # real vs real (disjoint halves) is far below real vs noise
    floor, _ = feature_fid(net, xr[:500].float() / 255, xr[500:].float() / 255, backend="direct")
    noise = torch.rand(500, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    far, _ = feature_fid(net, xr[:500].float() / 255, noise, backend="direct")
    assert far > 10 * floor
