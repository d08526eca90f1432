"""Log-likelihood of a Bernoulli RBM on a data split, log Z by AIS (Salakhutdinov & Murray
2008): intermediate RBMs, block-Gibbs transitions, base = independent Bernoulli of the
training mean, and

    LL = mean_{x in split} log p~(x) - log Z.

:func:`trusted_ais` repeats the AIS with twice the temperatures while independent groups of
its chains disagree (the spread of their log Z estimates) by more than a bound.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.metrics.ais import group_spread, rbm_ais_log_z, rbm_exact_log_z, weight_ess
from ebmlab.metrics.tempered_ais import mean_log_prob

EXACT_MAX_UNITS = 20  # exact log Z by enumerating the smaller layer up to this size


def ais_base_logits(train_x: Tensor) -> Tensor:
    """Logits of the AIS base distribution: independent Bernoulli of the training mean,
    clamped to [0.01, 0.99] so that no pixel is impossible."""
    m = train_x.mean(0).clamp(0.01, 0.99)
    return torch.log(m) - torch.log1p(-m)


@dataclass(frozen=True)
class RBMAIS:
    """An AIS estimate of an RBM's log Z with ``chains`` chains split into ``groups`` groups;
    ``chunk`` rows at a time when averaging log p~ over a split."""

    chains: int
    groups: int
    chunk: int

    def log_z(self, model, base_b: Tensor, temps: int, generator, progress: bool) -> dict:
        """AIS log Z, its standard error, the spread of its groups of chains and the weights'
        effective sample size."""
        W, b, c = model.parameters_for_ais()
        res = rbm_ais_log_z(W, b, c, base_b, temps, self.chains, generator, progress=progress)
        return {
            "log_z": res.log_z,
            "log_z_stderr": res.log_z_stderr,
            "log_z_spread": group_spread(res.log_weights, self.groups),
            "log_z_weight_ess": weight_ess(res.log_weights),
        }

    def with_test_ll(self, model, test_x: Tensor, ais: dict) -> dict:
        """``ais`` with the test LL it gives, and the exact values for a tiny RBM."""
        mean_lp = mean_log_prob(model, test_x, self.chunk)
        out = {**ais, "test_ll": mean_lp - ais["log_z"]}
        if min(model.n_visible, model.n_hidden) <= EXACT_MAX_UNITS:
            W, b, c = model.parameters_for_ais()
            exact = rbm_exact_log_z(W, b, c, max_units=EXACT_MAX_UNITS)
            out.update(log_z_exact=exact, test_ll_exact=mean_lp - exact)
        return out

    def trusted(self, model, base_b, test_x, temps, spread_max, temps_max, generator, progress):
        """The AIS with ``temps`` temperatures, repeated with twice as many while its groups of
        chains disagree by more than ``spread_max`` nats (up to ``temps_max``); with the test
        LL, the temperatures used (``ais_temps``), ``ais_seconds`` and every ``attempts``."""
        t0, attempts = time.perf_counter(), []
        while True:
            ais = self.log_z(model, base_b, temps, generator, progress)
            spread, ess = ais["log_z_spread"], ais["log_z_weight_ess"]
            attempts.append(
                {"temps": temps, "log_z": ais["log_z"], "log_z_spread": spread, "weight_ess": ess}
            )
            if spread <= spread_max or temps >= temps_max:
                break
            more = min(2 * temps, temps_max)
            print(
                f"ebmlab: AIS log Z spread {spread:.2f} nats over {self.groups} groups of "
                f"chains with {temps:,} temperatures (> ais_spread_max {spread_max:g}); "
                f"again with {more:,}",
                file=sys.stderr,
            )
            temps = more
        if spread > spread_max:
            print(
                f"ebmlab: AIS log Z spread still {spread:.2f} nats at ais_temps_max "
                f"{temps:,} temperatures; reported as log_z_spread",
                file=sys.stderr,
            )
        out = self.with_test_ll(model, test_x, ais)  # the test set's log p~ once
        seconds = time.perf_counter() - t0
        return {**out, "ais_temps": temps, "ais_seconds": seconds, "attempts": attempts}
