"""RBM learning (ACS Table 1): PCD with any sampler, test log-likelihood by RBM AIS.

A 784 x 500 Bernoulli RBM (visible bias from the data mean) is trained by PCD
(``learner=pcd``: 100 persistent chains, batch 100, Adam 1e-3, ``sampler_steps`` per iteration;
``learner=acs_pcd`` with ``sampler=acs`` for ACS's PCD schedule, Algorithm 6). At the end,
log Z is estimated by AIS with intermediate RBMs and block-Gibbs transitions (Salakhutdinov &
Murray 2008; ``ais_temps`` = 100,000 linear temperatures at paper scale, base = independent
Bernoulli of the training mean) and

    test LL = mean_{x in test} log p~(x) - log Z.

For tiny RBMs (min(V, H) <= 20) the exact log Z is reported beside the estimate
(``test_ll_exact``). Optionally a cheaper AIS runs every ``ais_every`` iterations.
"""

from __future__ import annotations

import math
import time

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.metrics.ais import rbm_ais_log_z, rbm_exact_log_z

_EXACT_MAX_UNITS = 20


def binary_split(dataset, split: str):
    """The split, refusing dynamic (grayscale) data: the RBM is trained on fixed binary images."""
    s = dataset.split(split)
    if s.binarize == "dynamic":
        raise ConfigError(
            "dataset.binarize",
            f"RBM learning needs fixed binary images; {dataset.name} is dynamic here "
            "(use dataset.binarize=threshold)",
        )
    return s


class RBMLearning:
    main_metric = "test_ll"

    def __init__(
        self,
        n_iters: int = 2000,
        eval_every: int = 100,
        checkpoint_every: int = 500,
        ais_temps: int = 100000,
        ais_chains: int = 100,
        ais_every: int = 0,
        ais_every_temps: int = 10000,
        init_visible_bias: bool = True,
        n_show: int = 100,
    ):
        check(n_iters >= 1, "n_iters", f"must be >= 1 (got {n_iters})")
        check(eval_every >= 1, "eval_every", f"must be >= 1 (got {eval_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        check(ais_temps >= 2, "ais_temps", f"must be >= 2 (got {ais_temps})")
        check(ais_chains >= 1, "ais_chains", f"must be >= 1 (got {ais_chains})")
        check(ais_every >= 0, "ais_every", f"must be >= 0 (0 = only at the end) (got {ais_every})")
        check(ais_every_temps >= 2, "ais_every_temps", f"must be >= 2 (got {ais_every_temps})")
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.n_iters, self.eval_every, self.checkpoint_every = n_iters, eval_every, checkpoint_every
        self.ais_temps, self.ais_chains = ais_temps, ais_chains
        self.ais_every, self.ais_every_temps = ais_every, ais_every_temps
        self.init_visible_bias, self.n_show = init_visible_bias, n_show

    def setup(self, ctx) -> None:
        for group in ("dataset", "model", "sampler", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"rbm_learning needs a {group}")
        self.data = ctx.build("dataset")
        self.data.check_files(["train", "test"])
        if ctx.cfg.model._target_ != "ebmlab.models.rbm.BernoulliRBM":
            raise ConfigError("model", "rbm_learning needs model=rbm")
        self.model = ctx.build("model").to(ctx.device)
        if self.model.n_visible != self.data.dim:
            raise ConfigError(
                "model.n_visible",
                f"must equal the dataset dimension {self.data.dim} (got {self.model.n_visible})",
            )
        self.sampler = ctx.build("sampler")
        self.learner = ctx.build("learner")
        if not hasattr(self.learner, "sample_batch"):
            raise ConfigError("learner", "rbm_learning needs a PCD learner (pcd or acs_pcd)")
        if hasattr(self.sampler, "pcd_step") and not hasattr(self.learner, "explore_steps"):
            raise ConfigError(
                "learner", "sampler=acs in PCD follows ACS's PCD schedule: use learner=acs_pcd"
            )

    def _ais(self, model, base_b, test_x, n_temps, g, progress) -> dict:
        W, b, c = model.parameters_for_ais()
        res = rbm_ais_log_z(
            W, b, c, base_b, n_temps, self.ais_chains, g, chunk=None, progress=progress
        )
        with torch.no_grad():
            lp = torch.cat(
                [model.log_prob(test_x[i : i + 1000]) for i in range(0, len(test_x), 1000)]
            )
        mean_lp = float(lp.double().mean())
        out = {"log_z": res.log_z, "log_z_stderr": res.log_z_stderr, "test_ll": mean_lp - res.log_z}
        if min(model.n_visible, model.n_hidden) <= _EXACT_MAX_UNITS:
            exact = rbm_exact_log_z(W, b, c, max_units=_EXACT_MAX_UNITS)
            out.update(log_z_exact=exact, test_ll_exact=mean_lp - exact)
        return out

    def run(self, ctx) -> dict:
        from ebmlab.utils.plotting import curves, image_grid

        g, dev = ctx.generator, ctx.device
        train = binary_split(self.data, "train")
        test = binary_split(self.data, "test")
        x = train.x.to(dev)
        test_x = test.x.to(dev)
        model, learner = self.model, self.learner
        mean = x.mean(0)
        if self.init_visible_bias:
            model.init_visible_bias_from_data(mean)
        m = mean.clamp(0.01, 0.99)
        base_b = torch.log(m) - torch.log1p(-m)  # AIS base: Bernoulli(data mean)
        learner.setup(model, self.sampler, x, g)
        ctx.start_clock()
        start, history = 0, {"step": [], "loss": []}
        totals = {"accept": 0.0, "n_log_prob": 0.0, "n": 0}
        ck = ctx.resume(model=model, learner=learner)
        if ck is not None:
            start, history, totals = ck["_run"]["step"], ck["history"], ck["totals"]
        bar = ctx.progress(self.n_iters, initial=start, desc="RBM learning")
        for it in range(start, self.n_iters):
            batch = learner.sample_batch(x, g)
            info = learner.step(model, batch, g)
            acc = info.get("accept_rate", float("nan"))
            if math.isfinite(acc):
                totals["accept"] += acc
                totals["n"] += 1
            totals["n_log_prob"] += info.get("n_log_prob", 0.0)
            step = it + 1
            if step % self.eval_every == 0 or step == self.n_iters:
                row = {k: float(v) for k, v in info.items()}
                row["seconds"] = ctx.elapsed()
                if self.ais_every and step % self.ais_every == 0 and step < self.n_iters:
                    ais = self._ais(model, base_b, test_x, self.ais_every_temps, g, False)
                    row.update({f"{k}_running": v for k, v in ais.items()})
                ctx.log(row, step=step)
                history["step"].append(step)
                history["loss"].append(row["loss"])
                bar.set_postfix(loss=f"{row['loss']:.2f}")
            if step % self.checkpoint_every == 0 and step < self.n_iters:
                ctx.save_checkpoint(
                    {
                        "model": model.state_dict(),
                        "learner": learner.state_dict(),
                        "history": history,
                        "totals": totals,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        train_seconds = ctx.elapsed()
        t0 = time.perf_counter()
        ais = self._ais(model, base_b, test_x, self.ais_temps, g, bool(ctx.cfg.progress))
        ais_seconds = time.perf_counter() - t0
        ctx.log({f"final_{k}": v for k, v in ais.items()}, step=self.n_iters)
        name = ctx.choices.get("sampler", "")
        ctx.save_figure(
            curves(
                {"PCD loss": (history["step"], history["loss"])},
                "iteration",
                "mean f(buffer) - mean f(data)",
                title=f"RBM learning, {self.data.name}, {name} ({ctx.scale})",
            ),
            "loss",
            step=self.n_iters,
        )
        if self.n_show:
            show = learner.buffer[: self.n_show].reshape(-1, *self.data.image_shape)
            ctx.save_figure(
                image_grid(show.cpu().numpy(), title=f"{name}: persistent chains"),
                "buffer",
                step=self.n_iters,
            )
        with torch.no_grad():
            train_lp = float(model.log_prob(x[:10000]).double().mean())
        return {
            **ais,
            "train_ll": train_lp - ais["log_z"],
            "accept_rate": totals["accept"] / max(totals["n"], 1),
            "evals_per_iter": totals["n_log_prob"] / self.n_iters,
            "seconds": train_seconds,
            "time_per_iter": train_seconds / self.n_iters,
            "ais_seconds": ais_seconds,
            "ais_temps": self.ais_temps,
            "n_iters": self.n_iters,
        }
