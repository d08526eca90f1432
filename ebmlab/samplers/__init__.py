"""Samplers: small objects with ``init`` and ``step`` on explicit chain state.

See :mod:`ebmlab.samplers.base` for the interface, docs/api.md for a tour.
"""

from ebmlab.samplers.base import ChainState, Sampler, StepInfo, value_and_grad

__all__ = ["ChainState", "Sampler", "StepInfo", "make", "value_and_grad"]


def make(name: str, **overrides) -> Sampler:
    """The sampler ``conf/sampler/<name>.yaml`` with its YAML values as the defaults and
    ``overrides`` replacing any of them: ``make("dmala", step_size=0.4)``."""
    from ebmlab.configs import make as make_option

    return make_option("sampler", name, **overrides)
