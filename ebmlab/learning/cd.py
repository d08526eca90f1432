"""Contrastive divergence (CD-k) training of a Bernoulli RBM, and an on-disk cache of trained
RBMs keyed by their training config.

CD-k (Hinton 2002), as in the RBM sampling protocol of GWG / DLP (App. I.3) and ACS (App. D.2):
negatives are k block-Gibbs sweeps started at the data batch; the loss
-(mean log p~(data) - mean log p~(negatives)) is minimised with Adam. The visible bias starts
at logit(clamp(data mean, .01, .99)).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.data.binary_images import BINARIZE_MODES, binarize_batch
from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.models.rbm import BernoulliRBM

log = logging.getLogger(__name__)


def _pos_int(v, key: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ConfigError(key, f"an integer >= 1 (got {v!r})")
    return v


def train_rbm_cd(
    model: BernoulliRBM,
    data_x: Tensor,
    k: int = 10,
    n_iters: int | None = None,
    n_epochs: int | None = None,
    batch_size: int = 100,
    lr: float = 1e-3,
    generator: torch.Generator | None = None,
    progress: bool = True,
    binarize: str = "static",
    init_visible_bias: bool = True,
    log_every: int = 100,
) -> list[float]:
    """Train ``model`` in place by CD-k from data with Adam.

    Args:
        data_x: [n, V] training images ({0,1}; grayscale in [0,1] with ``binarize="dynamic"``).
        k: Gibbs sweeps per negative sample (DLP: 10; ACS paper: 100).
        n_iters / n_epochs: exactly one; an epoch is one shuffled pass in full batches
            (DLP: 1 epoch at batch 100).
        binarize: how each batch is binarised (:func:`ebmlab.data.binary_images.binarize_batch`).
        init_visible_bias: set b = logit(clamp(data mean, .01, .99)) before training.

    Returns the per-iteration CD objective mean log p~(data) - mean log p~(negatives).
    Raises DivergenceError if it becomes NaN/Inf.
    """
    k = _pos_int(k, "k")
    batch_size = _pos_int(batch_size, "batch_size")
    if (n_iters is None) == (n_epochs is None):
        raise ConfigError(
            "n_iters", f"give exactly one of n_iters, n_epochs (got {n_iters}, {n_epochs})"
        )
    if n_iters is not None:
        _pos_int(n_iters, "n_iters")
    else:
        _pos_int(n_epochs, "n_epochs")
    if not float(lr) > 0:
        raise ConfigError("lr", f"a float > 0 (got {lr!r})")
    if binarize not in BINARIZE_MODES:
        raise ConfigError("binarize", f"one of {list(BINARIZE_MODES)} (got {binarize!r})")
    if generator is None:
        raise ValueError("train_rbm_cd needs an explicit torch.Generator")
    dev = model.W.device
    data_x = data_x.reshape(data_x.shape[0], -1).to(dev, torch.float32)
    n = data_x.shape[0]
    if data_x.shape[1] != model.n_visible:
        raise ConfigError(
            "n_visible", f"model has {model.n_visible} visible units, data has {data_x.shape[1]}"
        )
    bs = min(batch_size, n)
    per_epoch = n // bs
    total = n_iters if n_iters is not None else n_epochs * per_epoch

    if init_visible_bias:
        model.init_visible_bias_from_data(data_x.mean(0))
    opt = torch.optim.Adam(model.parameters(), lr=float(lr))
    history: list[float] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=f"CD-{k}", leave=False)
    it = 0
    while it < total:
        perm = torch.randperm(n, generator=generator).to(dev)
        for j in range(per_epoch):
            if it >= total:
                break
            x = binarize_batch(data_x[perm[j * bs : (j + 1) * bs]], binarize, generator)
            x_neg = model.gibbs(x, k, generator)
            obj = model.log_prob(x).mean() - model.log_prob(x_neg).mean()
            loss = -obj
            if not torch.isfinite(loss):
                raise DivergenceError(it, "CD loss")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            history.append(float(obj.detach()))
            it += 1
            if bar is not None:
                bar.update(1)
            if log_every and it % log_every == 0:
                log.info("CD-%d iter %d/%d: log p~(data) - log p~(neg) = %.4f", k, it, total, obj)
    if bar is not None:
        bar.close()
    return history


@torch.no_grad()
def reconstruction_error(model: BernoulliRBM, x: Tensor) -> float:
    """Mean squared error between x and its mean-field reconstruction sigmoid(W^T p(h|x) + b)."""
    p_h = torch.sigmoid(model.hidden_logits(x))
    return float(((torch.sigmoid(model.visible_logits(p_h)) - x) ** 2).mean())


def config_hash(cfg: dict) -> str:
    """Stable short hash of a JSON-serialisable config (keys sorted)."""
    blob = json.dumps(cfg, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cached_rbm(
    cfg: dict,
    train_fn: Callable[[], BernoulliRBM],
    cache_dir: str | Path,
    device: torch.device | str | None = None,
) -> BernoulliRBM:
    """Return the RBM trained under ``cfg``: loaded from ``cache_dir/rbm-<hash(cfg)>.pt`` when
    present, else ``train_fn()`` is called and its result saved there atomically.

    ``cfg`` must hold everything that determines the trained weights (model size and init,
    dataset name/split/binarisation, CD settings, seed). The file holds the state dict, the
    layer sizes and the config itself; it is read with ``torch.load(weights_only=True)``.
    The returned model has ``loaded_from_cache`` set to True or False.
    """
    cache_dir = Path(cache_dir)
    path = cache_dir / f"rbm-{config_hash(cfg)}.pt"
    if path.is_file():
        blob = torch.load(path, map_location=device or "cpu", weights_only=True)
        model = BernoulliRBM(int(blob["n_visible"]), int(blob["n_hidden"]))
        model.load_state_dict(blob["state_dict"])
        if device is not None:
            model = model.to(device)
        model.loaded_from_cache = True
        log.info("loaded cached RBM %s", path)
        return model
    model = train_fn()
    cache_dir.mkdir(parents=True, exist_ok=True)
    blob = {
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "n_visible": model.n_visible,
        "n_hidden": model.n_hidden,
        "config": json.dumps(cfg, sort_keys=True, default=str),
    }
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(blob, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    model.loaded_from_cache = False
    log.info("trained RBM cached at %s", path)
    return model
