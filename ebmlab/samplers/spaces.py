"""The state space a model lives on, as a sampler needs it: kind and number of values.

Every sampler declares ``state_spaces`` (the model ``state_kind`` values it supports); the
runner checks a sampler against a model from it before any compute, and
:func:`state_space` repeats the check where a sampler is driven directly.
"""

from __future__ import annotations

from typing import NamedTuple

from ebmlab.core.protocols import BINARY, CATEGORICAL, CONTINUOUS, ORDINAL
from ebmlab.errors import ConfigError

__all__ = ["BINARY", "CATEGORICAL", "CONTINUOUS", "ORDINAL", "StateSpace", "state_space"]


class StateSpace(NamedTuple):
    """``kind`` (binary / ordinal / categorical / continuous) and values per coordinate."""

    kind: str
    n_states: int


def state_space(model, sampler, kind: str | None = None, key: str = "sampler") -> StateSpace:
    """The model's state space (or ``kind`` when given), checked against
    ``sampler.state_spaces``; ConfigError(``key``) names the supported kinds otherwise."""
    kind = model.state_kind if kind is None else kind
    if kind not in sampler.state_spaces:
        raise ConfigError(
            key,
            f"{type(sampler).__name__} supports {' and '.join(sampler.state_spaces)} models, "
            f"not state_kind={kind!r}",
        )
    return StateSpace(kind, 2 if kind == BINARY else int(model.n_states))
