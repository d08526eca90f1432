"""The FID feature classifier's spec: validation, and a cache keyed by every training setting."""

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.metrics.image_fid import FeatureNetSpec

SPEC = dict(train_split="train", epochs=1, seed=0, width=2, feature_dim=4, lr=1e-3, batch_size=8)


def test_spec_is_cached_under_every_setting(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (24, 1, 8, 8), generator=g, dtype=torch.uint8)
    y = torch.arange(24) % 3
    key = {"dataset": "toy", "n": 24}
    net, cached = FeatureNetSpec(**SPEC).trained(x, y, tmp_path, key, "cpu")
    assert not cached and net.num_features == 4
    again, cached = FeatureNetSpec(**SPEC).trained(x, y, tmp_path, key, "cpu")
    assert cached
    for a, b in zip(net.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    for change in ({"lr": 2e-3}, {"batch_size": 4}, {"width": 3}, {"seed": 1}, {"epochs": 2}):
        _, cached = FeatureNetSpec(**{**SPEC, **change}).trained(x, y, tmp_path, key, "cpu")
        assert not cached, change
    assert len(list(tmp_path.glob("feature_net-*.pt"))) == 6


def test_spec_validation_names_the_key():
    with pytest.raises(ConfigError, match="feature_net.lr"):
        FeatureNetSpec(**{**SPEC, "lr": 0.0})
    with pytest.raises(ConfigError, match="feature_net.width"):
        FeatureNetSpec(**{**SPEC, "width": 0})
