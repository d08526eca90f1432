"""Samplers: small objects with ``init`` and ``step`` on explicit chain state.

See :mod:`ebmlab.samplers.base` for the interface.
"""

from ebmlab.samplers.base import ChainState, Sampler, StepInfo, value_and_grad

__all__ = ["ChainState", "Sampler", "StepInfo", "value_and_grad"]
