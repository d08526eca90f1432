"""Log-likelihood of a learned deep EBM by AIS (DLP / ACS deep-EBM protocol, PROTOCOLS.md
"Deep EBMs"): LL = mean_{x} log p~(x) - log Z, log Z by AIS over linear temperatures from
the Bernoulli base to the model (f_b = base + b net), one kernel step per temperature
(:func:`ebmlab.metrics.tempered_ais.tempered_ais_log_z`): one GWG flip (the protocol) or
one DMALA step."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.metrics.ais import linear_betas
from ebmlab.metrics.tempered_ais import mean_log_prob, tempered_ais_log_z
from ebmlab.models.resnet_ebm import ResNetEBM, TemperedEBM
from ebmlab.samplers.dlp import DMALA
from ebmlab.samplers.gwg import GWG

AIS_KERNELS = ("gwg", "dmala")


@dataclass(frozen=True)
class AISLikelihood:
    """One AIS protocol: ``n_temps`` linear temperatures, ``n_chains`` chains, ``kernel``
    (gwg | dmala, DMALA with ``step_size``), log p~ averaged ``chunk`` rows at a time."""

    n_temps: int
    n_chains: int
    kernel: str
    step_size: float
    chunk: int

    def __call__(self, model: ResNetEBM, x: Tensor, generator: torch.Generator, progress: bool):
        """{"ll", "log_z", "log_z_stderr", "ais_seconds"} of ``model`` on the rows of ``x``."""
        t0 = time.perf_counter()
        kernel = GWG(n_flips=1) if self.kernel == "gwg" else DMALA(self.step_size, None)
        betas = linear_betas(self.n_temps)
        res = tempered_ais_log_z(
            TemperedEBM(model), kernel, betas, self.n_chains, generator, progress
        )
        ll = mean_log_prob(model, x, self.chunk) - res.log_z
        seconds = time.perf_counter() - t0
        return {
            "ll": ll,
            "log_z": res.log_z,
            "log_z_stderr": res.log_z_stderr,
            "ais_seconds": seconds,
        }
