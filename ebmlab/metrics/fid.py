"""Frechet distance between Gaussian fits of feature sets (FID; Heusel et al. 2017).

d^2 = ||mu1 - mu2||^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^{1/2}), with
tr((S1 S2)^{1/2}) = tr((S1^{1/2} S2 S1^{1/2})^{1/2}) computed from symmetric
eigendecompositions in float64 (stable; no complex square roots).

The GRBM paper reports MNIST FID (Table 1-3) without a protocol; the standard
Inception weights (torch-fidelity's ``pt_inception-2015-12-05-6726825d.pth``)
cannot be downloaded on our machines, so :func:`inception_fid` only runs from
a local copy and otherwise fails at once. :class:`FeatureFID` computes the same
distance with any user-supplied feature network (e.g. an MNIST classifier).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

INCEPTION_WEIGHTS_FILE = "pt_inception-2015-12-05-6726825d.pth"
INCEPTION_WEIGHTS_ENV = "EBMLAB_INCEPTION_WEIGHTS"

ArrayLike = Tensor | np.ndarray


def _f64(a: ArrayLike) -> Tensor:
    if isinstance(a, Tensor):
        return a.detach().to(device="cpu", dtype=torch.float64)
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def _psd_sqrt(s: Tensor) -> Tensor:
    """Symmetric PSD square root via eigh (negative rounding eigenvalues clipped to 0)."""
    evals, evecs = torch.linalg.eigh((s + s.T) / 2)
    return (evecs * evals.clamp_min(0.0).sqrt()) @ evecs.T


def frechet_distance(mu1: ArrayLike, sigma1: ArrayLike, mu2: ArrayLike, sigma2: ArrayLike) -> float:
    """Squared Frechet (2-Wasserstein) distance between N(mu1, sigma1) and N(mu2, sigma2)."""
    mu1, mu2, s1, s2 = (_f64(a) for a in (mu1, mu2, sigma1, sigma2))
    d = mu1.shape[0]
    if mu2.shape != (d,) or s1.shape != (d, d) or s2.shape != (d, d):
        raise ValueError(
            f"shape mismatch: mu1 {tuple(mu1.shape)}, sigma1 {tuple(s1.shape)}, "
            f"mu2 {tuple(mu2.shape)}, sigma2 {tuple(s2.shape)}"
        )
    r1 = _psd_sqrt(s1)
    m = r1 @ s2 @ r1
    tr_sqrt = torch.linalg.eigvalsh((m + m.T) / 2).clamp_min(0.0).sqrt().sum()
    dist = (mu1 - mu2).square().sum() + torch.trace(s1) + torch.trace(s2) - 2.0 * tr_sqrt
    return max(float(dist), 0.0)


def _mean_cov(f: Tensor) -> tuple[Tensor, Tensor]:
    if f.dim() != 2 or f.shape[0] < 2:
        raise ValueError(f"features must be [n >= 2, k] (got shape {tuple(f.shape)})")
    mu = f.mean(0)
    fc = f - mu
    return mu, fc.T @ fc / (f.shape[0] - 1)


def feature_frechet_distance(real_features: ArrayLike, fake_features: ArrayLike) -> float:
    """Frechet distance between Gaussian fits (mean, unbiased covariance) of two [n, k] sets."""
    mu1, s1 = _mean_cov(_f64(real_features))
    mu2, s2 = _mean_cov(_f64(fake_features))
    return frechet_distance(mu1, s1, mu2, s2)


def _torchmetrics_fid():
    """torchmetrics' FrechetInceptionDistance class, or a clear ImportError.

    (torchmetrics imports torchvision at import time; a torchvision build that
    does not match torch fails there with a RuntimeError.)
    """
    try:
        from torchmetrics.image.fid import FrechetInceptionDistance
    except Exception as e:
        raise ImportError(
            f"torchmetrics' FrechetInceptionDistance could not be imported ({type(e).__name__}: "
            f"{e}); check that torchvision matches torch (same version and CPU/CUDA build)"
        ) from e
    return FrechetInceptionDistance


class _WithNumFeatures(nn.Module):
    """Wraps a feature module to tell torchmetrics its output width (no probe call)."""

    def __init__(self, net: nn.Module, num_features: int):
        super().__init__()
        self.net = net
        self.num_features = num_features

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class FeatureFID:
    """FID with a custom feature network, on torchmetrics' ``FrechetInceptionDistance``.

    ``feature`` maps an image batch [n, ...] (float) to features [n, k]. Give
    ``num_features`` (k) when the module has no ``num_features`` attribute, or
    ``input_shape`` (one image's shape) so torchmetrics can probe it.
    Usage: ``update(imgs, real=True/False)`` repeatedly, then ``compute()``.
    """

    def __init__(
        self,
        feature: nn.Module,
        num_features: int | None = None,
        input_shape: tuple[int, ...] | None = None,
        reset_real_features: bool = True,
    ):
        feature = feature.eval()
        if num_features is not None:
            if num_features < 1:
                raise ValueError(f"num_features must be >= 1 (got {num_features})")
            feature = _WithNumFeatures(feature, int(num_features))
        elif not hasattr(feature, "num_features") and input_shape is None:
            raise ValueError(
                "give num_features or input_shape for a feature module without num_features"
            )
        kw = {} if input_shape is None else {"input_img_size": tuple(input_shape)}
        FrechetInceptionDistance = _torchmetrics_fid()
        self.metric = FrechetInceptionDistance(
            feature=feature, normalize=True, reset_real_features=reset_real_features, **kw
        )

    @torch.no_grad()
    def update(self, imgs: Tensor, real: bool) -> None:
        self.metric.update(imgs, real=real)

    def compute(self) -> float:
        return float(self.metric.compute())

    def reset(self) -> None:
        self.metric.reset()


def _resolve_weights(weights_path: str | None) -> Path:
    path = weights_path or os.environ.get(INCEPTION_WEIGHTS_ENV)
    if not path or not Path(path).is_file():
        where = f"'{path}' does not exist" if path else "no weights_path given"
        raise FileNotFoundError(
            f"Inception FID weights are absent ({where}). This code never downloads them. "
            f"Copy torch-fidelity's '{INCEPTION_WEIGHTS_FILE}' to this machine and pass its path "
            f"as weights_path (or set ${INCEPTION_WEIGHTS_ENV}); without it use FeatureFID or "
            "feature_frechet_distance with a local feature network."
        )
    return Path(path)


def inception_fid(
    real_images: Tensor,
    fake_images: Tensor,
    weights_path: str | None,
    batch_size: int = 100,
    device: str | torch.device = "cpu",
) -> float:
    """Standard FID (InceptionV3 pool features, 2048-d) from a LOCAL weights file only.

    Images: float in [0, 1], [n, C, H, W] with C = 1 (replicated to RGB) or 3.
    Raises FileNotFoundError when the weights file is absent (checked first, so
    nothing is ever downloaded) and ModuleNotFoundError without torch-fidelity.
    """
    path = _resolve_weights(weights_path)
    try:
        import torch_fidelity  # noqa: F401
    except ImportError as e:
        raise ModuleNotFoundError(
            "inception_fid needs the 'torch-fidelity' package (pip install torch-fidelity)"
        ) from e
    FrechetInceptionDistance = _torchmetrics_fid()
    metric = FrechetInceptionDistance(
        feature=2048, normalize=True, feature_extractor_weights_path=str(path)
    ).to(device)

    def feed(imgs: Tensor, real: bool) -> None:
        if imgs.dim() != 4 or imgs.shape[1] not in (1, 3):
            raise ValueError(f"images must be [n, 1 or 3, H, W] (got {tuple(imgs.shape)})")
        for s in range(0, imgs.shape[0], batch_size):
            x = imgs[s : s + batch_size].to(device=device, dtype=torch.float32).clamp(0.0, 1.0)
            metric.update(x.expand(-1, 3, -1, -1), real=real)

    with torch.no_grad():
        feed(real_images, True)
        feed(fake_images, False)
    return float(metric.compute())
