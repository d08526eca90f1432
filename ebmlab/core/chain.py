"""The one place that advances chains: :class:`ChainRunner`.

    runner = ChainRunner(model, sampler, state, generator, run_steps=n)
    info = runner.step()      # one step: the adaptation's while it adapts, else the kernel's
    sums = runner.run(k)      # k steps as one block; per-step scalar sums left on the device
    sums = runner.run(k, record=f)  # and f(state) after each step, stacked: sums["record"]
    runner.warm_up()          # steps until the adaptation is frozen (nothing once frozen)
    d = runner.state_dict()   # chains, steps taken, adaptation / frozen kernel state

``sampler`` is a :class:`~ebmlab.core.protocols.Kernel` or an
:class:`~ebmlab.core.protocols.Adaptation`. An adaptation steps the chains (and tunes its
parameters) until it reports ``done``; the runner then calls ``frozen()`` exactly once and
steps the returned fixed-parameter kernel from then on (an adaptation done from the start,
e.g. ACS with ``tune: false``, is frozen at construction). Warm-up steps are ordinary steps:
counted in ``steps`` and kept in ``state_dict``, so a run resumed mid-warm-up continues the
adaptation where it stopped and a run resumed after it never re-runs it.

Every draw comes from ``generator``, which must live on the chains' device. ``run(k)`` is the
unit a CUDA graph captures (issue 46): it reads nothing back to the host. On CUDA with
``compile: graph`` (:mod:`ebmlab.core.graphs`) the blocks of the frozen kernel are captured
once per shape / parameter key and replayed, with the same numbers as eager steps; warm-up
(adaptation) steps always run eagerly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ebmlab.core import graphs
from ebmlab.core.protocols import Adaptation, Kernel, PlannedAdaptation
from ebmlab.core.state import ChainState, StepInfo


class ChainRunner:
    """Advances ``state`` with ``sampler`` (a Kernel or an Adaptation) and ``generator``.

    ``run_steps`` is the length of the run the chains are for (sampling steps); an adaptation
    whose budget depends on it (:class:`~ebmlab.core.protocols.PlannedAdaptation`, ACS's
    ``tune_budget_frac``) is planned with it here, so a budget that cannot fit fails (with a
    ConfigError) before any step.
    """

    def __init__(
        self,
        model: Any,
        sampler: Kernel | Adaptation,
        state: ChainState,
        generator: torch.Generator,
        run_steps: int | None = None,
        capture: graphs.GraphedSteps | None | str = "auto",
    ):
        _check_device(state.x, generator)
        # "auto": CUDA graphs on CUDA with compile: graph (core.graphs), else eager
        self.capture = graphs.for_device(state.x.device) if capture == "auto" else capture
        self.model, self.state, self.generator = model, state, generator
        self.steps = 0  # steps taken, warm-up included
        self.adaptation: Adaptation | None = None
        self._kernel: Kernel | None = None
        if isinstance(sampler, Adaptation):
            self.adaptation = sampler
            if isinstance(sampler, PlannedAdaptation) and run_steps is not None:
                sampler.plan(int(run_steps))  # unplanned, one that needs it fails at its step
            if sampler.done:
                self._kernel = sampler.frozen()
        else:
            self._kernel = sampler

    @property
    def adapting(self) -> bool:
        """True while the adaptation runs (its steps are the chain's steps)."""
        return self._kernel is None

    @property
    def kernel(self) -> Kernel | Adaptation:
        """What the next step runs: the adaptation while adapting, else the fixed kernel."""
        return self.adaptation if self._kernel is None else self._kernel

    def step(self) -> StepInfo:
        """One step of the chains; freezes the adaptation once it reports done."""
        if self._kernel is None:
            self.state, info = self.adaptation.step(self.model, self.state, self.generator)
            if self.adaptation.done:
                self._kernel = self.adaptation.frozen()
        else:
            self.state, info = self._kernel.step(self.model, self.state, self.generator)
        self.steps += 1
        return info

    def run(self, n: int, record: Callable[[ChainState], Tensor] | None = None) -> dict:
        """``n`` steps as one block. Returns the sums over the block of the per-step scalars
        (:meth:`StepInfo.totals`: float64 tensors on the device, integer costs) and ``steps``;
        nothing is read back to the host. Blocks of the frozen kernel go through the capture.

        ``record`` (a function of the chain state, the same object every block so a graph is
        kept for it): its value after each step, stacked into ``sums["record"]`` [n, ...],
        e.g. a task's per-step trace, written into the trace once per block."""
        if self.capture is not None and not self.adapting:
            kernel, model, gen = self._kernel, self.model, self.generator
            block = self._block if record is None else functools.partial(self._block, record=record)
            self.state, sums = self.capture.run(block, kernel, model, self.state, n, gen, record)
            self.steps += n
            return sums
        self.state, sums = _steps(self.state, n, self._step_from, record)
        return sums

    def _step_from(self, state: ChainState) -> tuple[ChainState, StepInfo]:
        """:meth:`step` from ``state`` (adapting and freezing as it does)."""
        self.state = state
        info = self.step()
        return self.state, info

    def _block(self, state: ChainState, n: int, record=None) -> tuple[ChainState, dict]:
        """``n`` steps of the frozen kernel from ``state``: what :meth:`run` does, as the
        function a capture records (it touches nothing but its arguments and the generator)."""

        def frozen_step(s: ChainState) -> tuple[ChainState, StepInfo]:
            return self._kernel.step(self.model, s, self.generator)

        return _steps(state, n, frozen_step, record)

    def warm_up(self) -> int:
        """Steps until the adaptation is frozen; returns how many (0 once frozen)."""
        n = 0
        while self.adapting:
            self.step()
            n += 1
        return n

    def state_dict(self) -> dict:
        return {
            "steps": self.steps,
            "chain": self.state.state_dict(),
            "adaptation": None if self.adaptation is None else self.adaptation.state_dict(),
            "frozen": not self.adapting,
            "kernel": None if self._kernel is None else self._kernel.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        """Restore chains (on this runner's device), steps and the adaptation or the frozen
        kernel: an adaptation frozen in ``d`` is frozen here without stepping it again."""
        self.steps = int(d["steps"])
        self.state = self.state.restored(d["chain"])
        if self.adaptation is not None:
            self.adaptation.load_state_dict(d["adaptation"])
            self._kernel = self.adaptation.frozen() if d["frozen"] else None
        if self._kernel is not None and d["kernel"] is not None:
            self._kernel.load_state_dict(d["kernel"])


def _steps(state: ChainState, n: int, step, record=None) -> tuple[ChainState, dict]:
    """``n`` calls of ``step(state) -> (state, info)``: the per-step scalars summed
    (:func:`add_totals`), ``record(state)`` after each step stacked into ``"record"``."""
    sums: dict[str, Tensor | int] = {}
    records = []
    for _ in range(n):
        state, info = step(state)
        add_totals(sums, info)
        if record is not None:
            records.append(record(state))
    if record is not None:
        sums["record"] = torch.stack(records)
    sums["steps"] = n
    return state, sums


def add_totals(sums: dict, info: StepInfo) -> None:
    """Add one step's :meth:`StepInfo.totals` to ``sums`` (float64 on the device, ints)."""
    for k, v in info.totals().items():
        v = v.detach().to(torch.float64) if isinstance(v, Tensor) else v
        sums[k] = sums[k] + v if k in sums else v


def _check_device(x: Tensor, generator: torch.Generator) -> None:
    dev, gen = x.device, generator.device
    if dev.type != gen.type or (dev.type == "cuda" and (dev.index or 0) != (gen.index or 0)):
        raise ValueError(f"the chains are on {dev} but the generator on {gen}: use the run's")
