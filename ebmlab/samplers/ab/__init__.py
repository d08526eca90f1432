"""Any-scale balanced samplers (AB; Sun et al., ICLR 2023).

- :mod:`~ebmlab.samplers.ab.kernel`: the AB step with FIXED parameters (AB-1st, AB-diag,
  DLP-trace, quadratic with the Gaussian integral trick);
- :mod:`~ebmlab.samplers.ab.adapt`: the burn-in adaptation :class:`ABAdaptation` (pairs -> W
  -> D -> (sigma, alpha) -> freeze), which owns its kernel; the configs build it as ``AB1st``,
  ``ABDiag``, ``ABQuadratic``, ``DLPTrace``, and Alg. 1 as written, adapting for the whole run,
  as ``AB1stAlg1``, ``ABQuadraticAlg1``;
- :mod:`~ebmlab.samplers.ab.sdp`: the SDP for the diagonal D (App. A.1).
"""

from ebmlab.samplers.ab.adapt import (
    AB1st,
    AB1stAlg1,
    ABAdaptation,
    ABDiag,
    ABQuadratic,
    ABQuadraticAlg1,
    DLPTrace,
    JumpAdapter,
    Phase,
)
from ebmlab.samplers.ab.kernel import (
    AB1stKernel,
    ABDiagKernel,
    ABProposal,
    ABQuadraticKernel,
    DLPTraceKernel,
    GaussianTrick,
)

__all__ = [
    "AB1st",
    "ABAdaptation",
    "AB1stAlg1",
    "AB1stKernel",
    "ABDiag",
    "ABDiagKernel",
    "ABProposal",
    "ABQuadratic",
    "ABQuadraticAlg1",
    "ABQuadraticKernel",
    "DLPTrace",
    "DLPTraceKernel",
    "GaussianTrick",
    "JumpAdapter",
    "Phase",
]
