"""Modified contrastive divergence for GRBMs (Liao et al. 2022, Alg. 3 and 4).

One update (:meth:`GRBMModifiedCD.step`: the next mini-batch of a shuffled pass over the data):

1. positive phase from the data batch: joint variant draws h+ ~ p(h|v+) and uses
   dE(v+, h+)/dtheta (Alg. 3 lines 3-5); marginal variant uses dF(v+)/dtheta (Alg. 4 line 4);
2. negative chain from N(0, I) noise (not from the data: the "modified" part), run for
   ``cd_steps`` sampler steps; the samples of every step after ``burn_in`` are negatives
   (burn-in 0 in the paper), with their h for the joint variant;
3. gradient = <dE/dtheta>_data - <dE/dtheta>_model (analytic, Eq. 14-17 / 33-36), total
   norm clipped to ``grad_clip`` (10), then plain SGD: no momentum, no weight decay, and the
   variances learned at the same rate as everything else; the learning rate follows a
   cosine decay from ``lr`` to 0 over training (:func:`cosine_lr`).

Any NaN/Inf in the negative samples, the gradient or the updated parameters raises
:class:`ebmlab.errors.DivergenceError` before the parameters are changed, so the model
keeps its last finite values.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.learning.batches import EpochBatches, Transform

VARIANTS = ("auto", "joint", "marginal")


def cosine_lr(base_lr: float, progress: float) -> float:
    """Cosine decay to 0: base_lr (1 + cos(pi * progress)) / 2, progress in [0, 1] (Eq. 22
    applied to the SGD learning rate; the paper's code steps it once per epoch, so pass
    progress = epoch_index / n_epochs)."""
    p = min(max(float(progress), 0.0), 1.0)
    return base_lr * (1.0 + math.cos(math.pi * p)) / 2.0


class GRBMModifiedCD:
    """Modified CD learner for :class:`ebmlab.models.grbm.GRBM` (implements
    :class:`~ebmlab.core.protocols.Learner`; needs a GRBM sampler).

    cd_steps: sampler steps of the negative chain per update (K in Alg. 3-4; 100).
    lr: initial SGD learning rate (0.01), cosine-decayed to 0 over ``n_epochs``.
    grad_clip: max total gradient norm (10); 0 disables clipping.
    variant: "joint" (Alg. 3), "marginal" (Alg. 4) or "auto" = joint for samplers that keep
        h (Gibbs, Gibbs-Langevin) and marginal for the Langevin sampler.
    burn_in: negative samples of steps <= burn_in are discarded (M in Alg. 3-4; 0).
    batch_size: mini-batch of a shuffled pass (the last partial batch dropped).
    n_epochs: passes over the data; the learning rate reaches 0 after them.
    mh_off_epochs: epochs at the start whose negative chains skip the Metropolis test
        (the paper's FashionMNIST warm-up; 0 = none).
    """

    needs_sampler = True

    def __init__(
        self,
        cd_steps: int,
        lr: float,
        grad_clip: float,
        variant: str,
        burn_in: int,
        batch_size: int,
        n_epochs: int,
        mh_off_epochs: int,
    ):
        if not isinstance(cd_steps, int) or isinstance(cd_steps, bool) or cd_steps < 1:
            raise ConfigError("cd_steps", f"an integer >= 1 (got {cd_steps!r})")
        if not (isinstance(lr, (int, float)) and lr >= 0 and math.isfinite(lr)):
            raise ConfigError("lr", f"a finite float >= 0 (got {lr!r})")
        if not (isinstance(grad_clip, (int, float)) and grad_clip >= 0):
            raise ConfigError("grad_clip", f"a float >= 0, 0 = no clipping (got {grad_clip!r})")
        if variant not in VARIANTS:
            raise ConfigError("variant", f"one of {list(VARIANTS)} (got {variant!r})")
        if not isinstance(burn_in, int) or not 0 <= burn_in < cd_steps:
            raise ConfigError("burn_in", f"an integer in [0, cd_steps) (got {burn_in!r})")
        for key, v, lo in (("batch_size", batch_size, 1), ("n_epochs", n_epochs, 1)):
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ConfigError(key, f"an integer >= {lo} (got {v!r})")
        if not isinstance(mh_off_epochs, int) or mh_off_epochs < 0:
            raise ConfigError("mh_off_epochs", f"an integer >= 0 (got {mh_off_epochs!r})")
        self.cd_steps = cd_steps
        self.lr = float(lr)
        self.grad_clip = float(grad_clip)
        self.variant = variant
        self.burn_in = burn_in
        self.batch_size, self.n_epochs, self.mh_off_epochs = batch_size, n_epochs, mh_off_epochs
        self.batches: EpochBatches | None = None
        self.n_updates = 0

    def resolve_variant(self, sampler) -> str:
        if self.variant != "auto":
            return self.variant
        return "joint" if sampler.joint else "marginal"

    # -- the Learner protocol ---------------------------------------------------------------
    def setup(
        self,
        model,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        """``data``: training rows (raw; ``transform`` maps a batch to model space, e.g. the
        dataset's standardisation). Sets ``n_steps = n_epochs * (len(data) // batch_size)``."""
        if sampler is None:
            raise ConfigError("sampler", "modified CD needs a GRBM sampler")
        if self.batch_size > data.shape[0]:
            raise ConfigError(
                "learner.batch_size",
                f"{self.batch_size} exceeds the {data.shape[0]} training rows",
            )
        self.sampler, self.data, self.transform = sampler, data, transform
        self.batches = EpochBatches(data.shape[0], self.batch_size, data.device)
        self.n_steps = self.n_epochs * self.batches.per_epoch

    @property
    def epoch(self) -> int:
        """The epoch the next step belongs to (0-based)."""
        return self.batches.epoch

    def step(self, model, generator: torch.Generator) -> dict:
        """One update on the next mini-batch (the epoch's permutation drawn at its start)."""
        epoch = self.batches.epoch
        batch = self.data[self.batches.next(generator)]
        if self.transform is not None:
            batch = self.transform(batch, generator)
        progress, adjust = epoch / self.n_epochs, epoch >= self.mh_off_epochs
        return self.cd_update(model, batch, self.sampler, generator, progress, adjust)

    def state_dict(self) -> dict:
        batches = None if self.batches is None else self.batches.state_dict()
        return {"n_updates": self.n_updates, "batches": batches}

    def load_state_dict(self, d: dict) -> None:
        self.n_updates = int(d["n_updates"])
        if self.batches is not None and d.get("batches") is not None:
            self.batches.load_state_dict(d["batches"])

    # -- the update -------------------------------------------------------------------------
    def negative_samples(
        self,
        model,
        sampler,
        shape: tuple[int, ...],
        generator: torch.Generator,
        need_h: bool = True,
        adjust: bool = True,
    ) -> tuple[Tensor, Tensor | None, Tensor]:
        """Run the negative chain from N(0, I) noise of ``shape`` for ``cd_steps`` steps.

        Returns (v [n_kept * B, D], h [n_kept * B, H] or None, mean acceptance rate). ``h``
        comes from the sampler's state when it keeps one, else (joint variant with the
        Langevin sampler) is drawn from p(h|v). ``adjust=False`` switches the Metropolis test
        off for this chain (the paper's FashionMNIST warm-up)."""
        device = model.W.device
        v0 = torch.randn(shape, generator=generator, device=device, dtype=model.W.dtype)
        kw = {"horizon": self.cd_steps}
        if not adjust:
            kw["adjust_step"] = self.cd_steps
        runner = ChainRunner(model, sampler, sampler.init(model, v0, **kw), generator)
        burn = runner.run(self.burn_in) if self.burn_in else {}  # one block, nothing kept
        vs, hs, acc = [], [], []
        for _ in range(self.cd_steps - self.burn_in):
            acc.append(runner.step().accept_prob.float().mean())
            v = runner.state.x.reshape(shape[0], -1)
            vs.append(v)
            if need_h:
                h = runner.state.extra.get("h")
                hs.append(h if h is not None else model.sample_h_given_v(v, generator))
        v = torch.cat(vs, 0)
        h = torch.cat(hs, 0) if need_h else None
        rate = torch.stack(acc).mean()
        if self.burn_in:  # the burn-in block's per-step sums (float64) join the kept steps'
            rate = (burn["accept_rate"] + torch.stack(acc).double().sum()) / self.cd_steps
        return v, h, rate

    @torch.no_grad()
    def cd_update(
        self,
        model,
        batch: Tensor,
        sampler,
        generator: torch.Generator,
        progress: float,
        adjust: bool = True,
    ) -> dict:
        """One modified-CD update of ``model`` in place on a data ``batch`` [B, ...].

        progress: fraction of training done (epoch / n_epochs), drives the cosine LR.
        Returns scalars: lr, grad_norm (before clipping), accept_rate, mean_var, recon_mse.
        """
        step_id = self.n_updates + 1
        variant = self.resolve_variant(sampler)
        v_pos = batch.reshape(batch.shape[0], -1).to(model.W.dtype)
        if variant == "joint":
            pos = (v_pos, model.sample_h_given_v(v_pos, generator))
        else:
            pos = v_pos
        v_neg, h_neg, accept_rate = self.negative_samples(
            model, sampler, tuple(batch.shape), generator, need_h=variant == "joint", adjust=adjust
        )
        if not torch.isfinite(v_neg).all():
            raise DivergenceError(step_id, "negative samples")
        grads = model.cd_grads(pos, (v_neg, h_neg) if variant == "joint" else v_neg)
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))
        if not torch.isfinite(norm):
            raise DivergenceError(step_id, "gradient")
        scale = 1.0
        if self.grad_clip > 0 and float(norm) > self.grad_clip:
            scale = self.grad_clip / (float(norm) + 1e-6)
        lr = cosine_lr(self.lr, progress)
        params = dict(model.named_parameters())
        new = {k: params[k] - (lr * scale) * g.to(params[k].dtype) for k, g in grads.items()}
        for k, p in new.items():
            if not torch.isfinite(p).all():
                raise DivergenceError(step_id, f"parameter {k}")
        for k, p in new.items():
            params[k].copy_(p)
        self.n_updates = step_id
        recon = model.mean_v_given_h(model.prob_h_given_v(v_pos))
        return {
            "lr": lr,
            "grad_norm": norm,
            "accept_rate": accept_rate,
            "mean_var": model.var.mean(),
            "recon_mse": ((recon - v_pos) ** 2).mean(),
        }

    def train_epoch(
        self,
        model,
        x: Tensor,
        batch_size: int,
        sampler,
        generator: torch.Generator,
        progress: float,
        adjust: bool = True,
        preprocess=None,
    ) -> dict[str, float]:
        """One pass over ``x`` in shuffled mini-batches with the caller's settings (the same
        draws as ``n_epochs`` passes of :meth:`step`); returns the per-update scalars
        averaged over the epoch. Kept for the GRBM tasks until they run on the core loop."""
        n = x.shape[0]
        n_batches = n // batch_size
        order = torch.randperm(n, generator=generator, device=x.device)
        sums: dict[str, float] = {}
        for b in range(n_batches):
            batch = x[order[b * batch_size : (b + 1) * batch_size]]
            if preprocess is not None:
                batch = preprocess(batch)
            info = self.cd_update(model, batch, sampler, generator, progress, adjust)
            for k, v in info.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        return {k: v / n_batches for k, v in sums.items()}


@torch.no_grad()
def sample_from_noise(
    model,
    sampler,
    n_samples: int,
    n_steps: int,
    generator: torch.Generator,
    shape: tuple[int, ...] | None = None,
) -> tuple[Tensor, Tensor]:
    """Draw samples as the paper displays them: start from N(0, I), run ``n_steps`` sampler
    steps (cosine horizon = n_steps), then show the conditional mean W h + mu with
    h ~ p(h|v). Returns (v_last, displayed), both [n_samples, *shape]."""
    shape = (model.n_visible,) if shape is None else tuple(shape)
    v0 = torch.randn((n_samples, *shape), generator=generator, device=model.W.device)
    runner = ChainRunner(model, sampler, sampler.init(model, v0, horizon=n_steps), generator)
    runner.run(n_steps)
    x = runner.state.x
    h = model.sample_h_given_v(x.reshape(n_samples, -1), generator)
    return x, model.mean_v_given_h(h).reshape(n_samples, *shape)
