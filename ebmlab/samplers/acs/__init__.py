"""Automatic Cyclical Sampler (ACS; Pynadath et al., ICML 2024).

- :mod:`~ebmlab.samplers.acs.kernel`: schedules (Eq. 8-9), the fixed-(alpha, beta) kernel
  step and the cyclical kernel of Algorithm 1 with a fixed schedule;
- :mod:`~ebmlab.samplers.acs.tune`: the automatic tuning (Algorithms 2-5), one step at a time;
- :mod:`~ebmlab.samplers.acs.sampler`: :class:`ACS`, the configured sampler: an Adaptation
  (the tuning) whose frozen kernel is the cyclical kernel with the tuned schedule.

ACS for PCD (Algorithm 6) is the learner's schedule, :mod:`ebmlab.learning.acs_schedule`.
"""

from ebmlab.samplers.acs.kernel import (
    ACSKernel,
    CyclicalKernel,
    alpha_schedule,
    cosine_beta_schedule,
    cyclical_value,
    kernel_step,
    log_proposal,
)
from ebmlab.samplers.acs.sampler import ACS
from ebmlab.samplers.acs.tune import ACSTuner, ACSTuning, TuneResult

__all__ = [
    "ACS",
    "ACSKernel",
    "ACSTuner",
    "ACSTuning",
    "CyclicalKernel",
    "TuneResult",
    "alpha_schedule",
    "cosine_beta_schedule",
    "cyclical_value",
    "kernel_step",
    "log_proposal",
]
