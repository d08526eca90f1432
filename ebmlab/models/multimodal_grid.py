"""The ACS 2-D multimodal toy target (Pynadath et al., ICML 2024, Sec. 4.1 Eq. 2, App. D.1).

Ordinal states x in {0..N}^2 with N = (n_side + 1) * spacing (App. D.1's MaxVal) and an
n_side x n_side grid of modes mu_ij = spacing * (i + 1, j + 1), i, j = 0..n_side-1, i.e.
evenly spaced ``spacing`` apart with one gap of ``spacing`` to each border (25 modes at
75, 150, ..., 375 in the paper's setting). [App. D.1 prints mu = MaxVal / (sqrt(L) + 2) (i + 1),
which spaces the modes 64.3 apart, contradicting its own "space between modes 75"; the
public reference code places them at linspace(0, MaxVal, n_side + 2)[1:-1], i.e. 75 apart.]

Two forms of the log density (both a log-sum over the modes):

* ``form="paper"`` (Eq. 2): f(x) = log sum_m exp(-||x - mu_m||^2 / (2 variance)).
* ``form="code"`` (the public reference code): f(x) = log sum_m exp(-||x - mu_m|| /
  (variance * L)), L the number of modes: an L2 norm (not squared), temperature
  variance * L = 3.75 in the paper's setting.

With the paper's variance 0.15 the Eq. 2 modes are a single lattice point wide (the
neighbour of a mode has mass exp(-1/0.3) = 3.6% of it), which is inconsistent with the
paper's tuned DMALA step alpha = 53 at acceptance 0.574 and with Fig. 1's blobs; the code
form reproduces both. The model config uses the code form and says so.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.models.base import EnergyModel

FORMS = ("paper", "code")


class MultimodalGrid(EnergyModel):
    """ACS Fig. 1 target: ``n_side`` x ``n_side`` modes, ``spacing`` apart, on {0..N}^2.

    n_side: modes per axis (paper 5: 25 modes). spacing: distance between neighbouring modes
    (paper 75). variance: the mode variance (paper 0.15). form: "paper" (Eq. 2, squared
    distance / (2 variance)) or "code" (distance / (variance * n_modes)).
    """

    state_kind = "ordinal"

    def __init__(self, n_side: int, spacing: int, variance: float, form: str):
        super().__init__()
        check(
            isinstance(n_side, int) and not isinstance(n_side, bool) and n_side >= 1,
            "n_side",
            f"must be an integer >= 1 (got {n_side!r})",
        )
        check(
            isinstance(spacing, int) and not isinstance(spacing, bool) and spacing >= 1,
            "spacing",
            f"must be an integer >= 1 (got {spacing!r})",
        )
        check(
            isinstance(variance, (int, float)) and math.isfinite(variance) and variance > 0,
            "variance",
            f"must be a finite number > 0 (got {variance!r})",
        )
        check(form in FORMS, "form", f"must be one of {list(FORMS)} (got {form!r})")
        self.n_side, self.spacing, self.variance, self.form = n_side, spacing, float(variance), form
        self.dim = 2
        self.max_value = (n_side + 1) * spacing  # App. D.1 MaxVal = (sqrt(L) + 1) * spacing
        self.n_states = self.max_value + 1
        c = spacing * torch.arange(1, n_side + 1, dtype=torch.float64)
        modes = torch.cartesian_prod(c, c)  # [L, 2], mode (i, j) at row i * n_side + j
        self.register_buffer("modes", modes.to(torch.get_default_dtype()))

    @property
    def n_modes(self) -> int:
        return self.n_side * self.n_side

    def _logits(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Per-mode log weights [batch, L] and differences x - mu [batch, L, 2]."""
        diff = x.to(self.modes.dtype)[:, None, :] - self.modes[None]
        sq = (diff**2).sum(-1)
        if self.form == "paper":
            return -sq / (2.0 * self.variance), diff
        return -torch.sqrt(sq) / (self.variance * self.n_modes), diff

    def log_prob(self, x: Tensor) -> Tensor:
        logits, _ = self._logits(x)
        return torch.logsumexp(logits, -1)

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """f and grad f = sum_m w_m grad(logit_m), w = softmax(logits) (0 at a code-form mode)."""
        with torch.no_grad():
            logits, diff = self._logits(x)
            w = torch.softmax(logits, -1)
            if self.form == "paper":
                g = -diff / self.variance
            else:
                norm = torch.sqrt((diff**2).sum(-1, keepdim=True))
                g = -diff / (norm.clamp_min(1e-12) * self.variance * self.n_modes)
            return torch.logsumexp(logits, -1), (w[:, :, None] * g).sum(1)

    def grid_log_probs(self) -> Tensor:
        """Normalised log p over the whole grid, [n_states, n_states] (x[0] rows, x[1] cols)."""
        v = torch.arange(self.n_states, dtype=self.modes.dtype, device=self.modes.device)
        pts = torch.cartesian_prod(v, v)
        lp = torch.cat([self.log_prob(c) for c in pts.split(65536)]).double()
        return (lp - torch.logsumexp(lp, 0)).reshape(self.n_states, self.n_states)

    def nearest_mode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(index of the nearest mode [batch], Euclidean distance to it [batch])."""
        diff = x.to(self.modes.dtype)[:, None, :] - self.modes[None]
        d = torch.sqrt((diff**2).sum(-1))
        dist, idx = d.min(-1)
        return idx, dist
