"""A small image classifier whose penultimate activations replace Inception features in FID.

The standard FID (Heusel et al. 2017) needs the InceptionV3 weights, which cannot be fetched on
offline machines. ``fid_<dataset>_features`` (e.g. ``fid_mnist_features``) is the same Frechet
distance between Gaussian fits of features, with features from :class:`FeatureNet`, a small CNN
trained by ebmlab on the dataset's labelled training split and cached. Its values are NOT
comparable with Inception FID numbers (such as the GRBM paper's Table 1) and must never be
reported under the name FID; they rank models trained and evaluated under the same protocol.

Images everywhere here are float [n, C, H, W] in [0, 1].
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmlab.metrics.fid import FeatureFID, feature_frechet_distance

CACHE_VERSION = 1


class FeatureNet(nn.Module):
    """conv3x3(C->w) ReLU maxpool2, conv3x3(w->2w) ReLU maxpool2, linear -> ``feature_dim`` ReLU
    (the features), linear -> ``n_classes``. ``image_size`` must be divisible by 4."""

    def __init__(
        self,
        in_channels: int = 1,
        image_size: int = 28,
        n_classes: int = 10,
        width: int = 16,
        feature_dim: int = 128,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"image_size must be divisible by 4 (got {image_size})")
        self.arch = {
            "in_channels": int(in_channels),
            "image_size": int(image_size),
            "n_classes": int(n_classes),
            "width": int(width),
            "feature_dim": int(feature_dim),
        }
        self.num_features = int(feature_dim)
        self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = nn.Linear(2 * width * (image_size // 4) ** 2, feature_dim)
        self.head = nn.Linear(feature_dim, n_classes)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for every weight and bias, from ``generator``."""
        with torch.no_grad():
            for layer in (self.conv1, self.conv2, self.fc, self.head):
                fan_in = layer.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                for p in (layer.weight, layer.bias):
                    u = torch.rand(p.shape, generator=generator, dtype=p.dtype)
                    p.copy_((2.0 * u - 1.0) * bound)

    def features(self, x: Tensor) -> Tensor:
        h = F.max_pool2d(F.relu(self.conv1(x - 0.5)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return F.relu(self.fc(h.flatten(1)))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


class FeatureExtractor(nn.Module):
    """``x -> net.features(x)`` with ``num_features`` set (what torchmetrics' FID expects)."""

    def __init__(self, net: FeatureNet):
        super().__init__()
        self.net = net
        self.num_features = net.num_features

    def forward(self, x: Tensor) -> Tensor:
        return self.net.features(x.to(next(self.net.parameters()).dtype))


def train_feature_net(
    images: Tensor,
    labels: Tensor,
    generator: torch.Generator,
    epochs: int = 5,
    batch_size: int = 128,
    lr: float = 1e-3,
    width: int = 16,
    feature_dim: int = 128,
    device: torch.device | str = "cpu",
) -> FeatureNet:
    """Train :class:`FeatureNet` with Adam and cross-entropy on (images [n, C, H, W] in [0, 1],
    labels [n]). Randomness (init, shuffling) only from ``generator`` (a CPU generator)."""
    if images.dim() != 4 or images.shape[2] != images.shape[3]:
        raise ValueError(f"images must be [n, C, S, S] (got {tuple(images.shape)})")
    n_classes = int(labels.max()) + 1
    net = FeatureNet(images.shape[1], images.shape[2], n_classes, width, feature_dim, generator)
    net = net.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    n = images.shape[0]
    net.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        for s in range(0, n, batch_size):
            idx = order[s : s + batch_size]
            x = images[idx].to(device=device, dtype=torch.float32)
            y = labels[idx].to(device)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return net.eval()


@torch.no_grad()
def accuracy(net: FeatureNet, images: Tensor, labels: Tensor, batch_size: int = 1000) -> float:
    dev = next(net.parameters()).device
    correct = 0
    for s in range(0, images.shape[0], batch_size):
        pred = net(images[s : s + batch_size].to(dev, torch.float32)).argmax(1).cpu()
        correct += int((pred == labels[s : s + batch_size].cpu()).sum())
    return correct / images.shape[0]


def cache_path(cache_dir: str | Path, key: dict) -> Path:
    blob = json.dumps({**key, "version": CACHE_VERSION}, sort_keys=True, default=str)
    return Path(cache_dir) / f"feature_net-{hashlib.sha256(blob.encode()).hexdigest()[:16]}.pt"


def cached_feature_net(
    cache_dir: str | Path,
    key: dict,
    train_fn: Callable[[], tuple[FeatureNet, dict]],
    device: torch.device | str = "cpu",
) -> tuple[FeatureNet, dict, bool]:
    """The classifier trained under ``key`` (everything that determines its weights): loaded from
    ``cache_dir/feature_net-<hash>.pt`` (``weights_only=True``) when present, else
    ``train_fn() -> (net, info)`` is called and saved there atomically.
    Returns (net in eval mode, info dict, loaded_from_cache)."""
    from ebmlab.utils.cache import load_cached, save_cached

    path = cache_path(cache_dir, key)
    blob = load_cached(path)
    if blob is not None:
        net = FeatureNet(**blob["arch"])
        net.load_state_dict(blob["state_dict"])
        return net.to(device).eval(), dict(blob.get("info", {})), True
    net, info = train_fn()
    state = {k: v.detach().cpu() for k, v in net.state_dict().items()}
    save_cached({"arch": net.arch, "state_dict": state, "info": info, "key": json.dumps(key)}, path)
    return net.to(device).eval(), info, False


def _torchmetrics_ok() -> bool:
    try:
        import torchmetrics.image.fid  # noqa: F401
    except Exception:  # e.g. a torchvision build that does not match torch
        return False
    return True


@torch.no_grad()
def feature_fid(
    net: FeatureNet,
    real: Tensor,
    fake: Tensor,
    batch_size: int = 500,
    backend: str = "auto",
) -> tuple[float, str]:
    """Frechet distance between Gaussian fits of ``net.features`` of two image sets, each
    [n, C, H, W] in [0, 1]. backend: "torchmetrics" (FrechetInceptionDistance with this feature
    network), "direct" (:func:`feature_frechet_distance`, the same formula) or "auto" (the
    first when torchmetrics imports). Returns (value, backend used)."""
    if backend not in ("auto", "torchmetrics", "direct"):
        raise ValueError(f"backend must be auto, torchmetrics or direct (got {backend!r})")
    if backend == "auto":
        backend = "torchmetrics" if _torchmetrics_ok() else "direct"
    net = net.eval()
    dev = next(net.parameters()).device
    if backend == "torchmetrics":
        metric = FeatureFID(FeatureExtractor(net))
        metric.metric.to(dev)
        for imgs, is_real in ((real, True), (fake, False)):
            for s in range(0, imgs.shape[0], batch_size):
                metric.update(imgs[s : s + batch_size].to(dev, torch.float32), real=is_real)
        return metric.compute(), backend

    def feats(imgs: Tensor) -> Tensor:
        return torch.cat(
            [
                net.features(imgs[s : s + batch_size].to(dev, torch.float32)).double().cpu()
                for s in range(0, imgs.shape[0], batch_size)
            ]
        )

    return feature_frechet_distance(feats(real), feats(fake)), backend
