"""The typed contracts between the layers (tasks -> learning -> samplers -> models).

Every part a config builds satisfies one of these protocols; code that uses a part
relies on the protocol, never on ``hasattr`` probing. Capabilities a part may or may
not have are declared as attributes (``state_spaces``, ``needs_sampler``) so they can
be checked at validation, before any compute.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from ebmlab.core.state import ChainState, StepInfo

# State spaces a model lives on and a kernel can move in.
BINARY, ORDINAL, CATEGORICAL, CONTINUOUS = "binary", "ordinal", "categorical", "continuous"


@runtime_checkable
class EnergyModel(Protocol):
    """An unnormalised density: ``log_prob(x) = -energy(x)`` per row of a batch."""

    state_kind: str  # one of BINARY, ORDINAL, CATEGORICAL, CONTINUOUS

    def log_prob(self, x: Tensor) -> Tensor: ...


@runtime_checkable
class Kernel(Protocol):
    """A Markov kernel on explicit state (BlackJAX shape): ``init`` then ``step``.

    ``state_spaces`` lists the model ``state_kind`` values the kernel supports; the
    runner refuses other combinations before any compute. ``exact`` is False for
    unadjusted kernels (DULA, ULA). A kernel's parameters are fixed while it runs;
    whatever changes them (tuning, adaptation) is an :class:`Adaptation`.
    """

    state_spaces: tuple[str, ...]
    exact: bool

    def init(self, model: EnergyModel, x: Tensor) -> ChainState: ...

    def step(
        self, model: EnergyModel, state: ChainState, generator: torch.Generator
    ) -> tuple[ChainState, StepInfo]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


@runtime_checkable
class Adaptation(Protocol):
    """Warm-up that tunes a kernel's parameters (AB's (sigma, alpha) and W, ACS's Algorithm 2,
    acceptance-rate tuning), BlackJAX style: its result is a fixed-parameter kernel.

    ``step`` advances the chains AND updates the parameters; ``done`` says when the budget
    is spent (it may be True from the start: nothing to adapt). ``frozen()``, called once
    after ``done``, returns the kernel with the adapted parameters fixed: an ordinary
    (exact, where its kind is) kernel whose ``state_dict()`` holds those parameters. The
    adaptation's own ``state_dict`` holds everything needed to continue it mid-way, or to
    call ``frozen()`` again after it is done (a resumed run re-runs no warm-up). Only
    :class:`ebmlab.core.chain.ChainRunner` needs to know an adaptation from a kernel.
    """

    def step(
        self, model: EnergyModel, state: ChainState, generator: torch.Generator
    ) -> tuple[ChainState, StepInfo]: ...

    @property
    def done(self) -> bool: ...

    def frozen(self) -> Kernel: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


@runtime_checkable
class PlannedAdaptation(Adaptation, Protocol):
    """An adaptation whose budget depends on the run's length (ACS: ``tune_budget_frac`` of
    the sampling steps). A runner given ``run_steps`` calls ``plan(run_steps)`` before any
    step (a task may call it earlier, to fail before compute: calling it again with the same
    length changes nothing); it raises ConfigError when the budget cannot fit."""

    def plan(self, run_steps: int) -> None: ...


@runtime_checkable
class DeclaredWarmup(Adaptation, Protocol):
    """An adaptation whose warm-up length a task sets before the first step (AB's
    ``burn_in``, RWM's ``adapt_steps``, acceptance tuning's steps)."""

    def set_warmup(self, n_steps: int) -> None: ...


@runtime_checkable
class UsesDataVariance(Protocol):
    """A kernel or adaptation whose proposal uses the data's per-coordinate variance (AB-diag:
    W_ii = 1 / (1 + var_i), AB Sec. 5.4). It declares ``uses_data_variance = True``
    (:class:`ebmlab.samplers.base.Sampler` declares False; a part without the attribute does
    not use it); a task that knows its data's variance hands it over with
    ``set_data_variance`` before ``init``, whatever the sampler's type."""

    uses_data_variance: bool

    def set_data_variance(self, var: Tensor) -> None: ...


@runtime_checkable
class Learner(Protocol):
    """A training algorithm: PCD, PCD with a replay buffer, ACS-PCD, CD, ratio matching,
    GRBM modified CD. ``setup`` binds model, data and (if ``needs_sampler``) a kernel;
    ``step`` is one optimiser update, drawing its own mini-batch, and returns scalars
    (tensors allowed: they are summed on the device and read only at evaluation)."""

    needs_sampler: bool

    def setup(
        self,
        model: Any,
        data: Tensor,
        generator: torch.Generator,
        sampler: Kernel | None = None,
        transform: Any = None,  # transform(batch, generator): dynamic binarisation etc.
    ) -> None: ...

    def step(self, model: Any, generator: torch.Generator) -> dict[str, Any]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


@runtime_checkable
class Task(Protocol):
    """One benchmark, declared as parts and callbacks; :func:`ebmlab.core.loop.run_task`
    owns the loop (resume, progress, cadence, checkpoints, divergence, fault hooks).

    - ``build(ctx)`` validates and builds everything (ConfigError before compute) and
      returns the task's parts (any object; the task's own callbacks receive it).
    - ``cadence`` gives the number of loop steps and how often to evaluate / checkpoint.
    - ``step(parts, step, ctx)`` does one unit of work (a sampler step, a training
      iteration, an epoch) and returns per-step scalars to accumulate (or None).
    - ``evaluate(parts, step, ctx)`` returns metrics, logged and kept in the history.
    - ``state_dict(parts)`` / ``load_state_dict(parts, d)``: what a checkpoint holds.
    - ``finish(parts, history, ctx)`` writes figures and returns ``results.json`` metrics.
    """

    main_metric: str

    def build(self, ctx) -> Any: ...

    def cadence(self, parts: Any) -> Any: ...

    def step(self, parts: Any, step: int, ctx) -> dict[str, Any] | None: ...

    def evaluate(self, parts: Any, step: int, ctx) -> dict[str, float]: ...

    def state_dict(self, parts: Any) -> dict: ...

    def load_state_dict(self, parts: Any, d: dict) -> None: ...

    def finish(self, parts: Any, history: Any, ctx) -> dict: ...
