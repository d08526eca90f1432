"""What the sampling tasks share: one set of chains, advanced by a
:class:`~ebmlab.core.chain.ChainRunner`, one loop step per sampling step.

An adaptation planned for the run (:class:`~ebmlab.core.protocols.PlannedAdaptation`: ACS's
Algorithm 2, whose budget is a share of the run's steps) is the run's warm-up: at loop step 1,
before the first sampling step, the runner steps it to its end, off the compute clock, and its
steps and seconds are the results' ``tune_steps`` / ``tune_seconds`` (added to ``seconds``).
An adaptation that is part of the run (AB's burn-in window, acceptance tuning) steps in the
loop's steps like any kernel. A checkpoint holds the runner, so a resumed run re-runs no
warm-up. The loop appends the sampler-cost block (acceptance, jump, evaluations per step).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.loop import LoopTask
from ebmlab.core.protocols import PlannedAdaptation
from ebmlab.core.state import ChainState
from ebmlab.errors import ConfigError


@dataclass
class Chains:
    """The runner and what its warm-up cost, checkpointed together."""

    runner: ChainRunner
    tune_steps: int = 0
    tune_seconds: float = 0.0

    @property
    def state(self) -> ChainState:
        return self.runner.state

    @property
    def x(self) -> Tensor:
        return self.runner.state.x

    def warm_up_report(self) -> dict:
        """``tune_steps``, ``tune_seconds`` and, once tuned, the tuned kernel's scalar
        parameters (ACS, Alg. 2: ``alpha_max``, ``alpha_min``)."""
        out = {"tune_steps": self.tune_steps, "tune_seconds": self.tune_seconds}
        params = self.runner.kernel.state_dict().items() if self.tune_steps else ()
        return {**out, **{k: v for k, v in params if isinstance(v, float)}}

    def state_dict(self) -> dict:
        return {"runner": self.runner.state_dict(), "tune": [self.tune_steps, self.tune_seconds]}

    def load_state_dict(self, d: dict) -> None:
        self.runner.load_state_dict(d["runner"])
        self.tune_steps, self.tune_seconds = int(d["tune"][0]), float(d["tune"][1])

    def legacy_state(self, chain: dict, sampler: dict, tune=(0, 0.0)) -> dict:
        """A :meth:`state_dict` from a checkpoint of the code before the runner (4bfdce4):
        the chains and the sampler's state (an adaptation's own, or a kernel's; ACS's was
        its cyclical kernel's, cycle position included, once tuned)."""
        a, frozen, kernel = self.runner.adaptation, True, sampler
        if a is not None:
            a.load_state_dict(sampler)
            frozen = a.done
            if not (frozen and isinstance(a, PlannedAdaptation)):
                kernel = None  # frozen() rebuilds the kernel from the adaptation
        runner = {"steps": 0, "chain": chain, "frozen": frozen, "kernel": kernel}
        runner["adaptation"] = None if a is None else a.state_dict()
        return {"runner": runner, "tune": list(tune)}


class ChainTask(LoopTask):
    """A LoopTask on one set of chains (``parts.chains``); the loop sets ``self.cadence``
    (``run:``) before ``build``. Subclasses call :meth:`build_sampler` early in ``build``
    (its budget check comes before any compute) and :meth:`start_chains` once the model and
    start are known; ``step`` / ``steps`` advance the chains (:attr:`record`, :meth:`keep`)."""

    reports_sampler_cost = True

    def build_sampler(self, ctx):
        """The configured sampler, an adaptation planned for this run's steps (ConfigError
        naming ``sampler.<key>`` when its budget cannot fit)."""
        sampler = ctx.build("sampler")
        if isinstance(sampler, PlannedAdaptation):
            try:
                sampler.plan(self.cadence.n_steps)
            except ConfigError as e:
                raise e.prefixed("sampler") from None
        return sampler

    def start_chains(self, ctx, model, sampler, x0: Tensor) -> Chains:
        state = sampler.init(model, x0)
        return Chains(ChainRunner(model, sampler, state, ctx.generator, self.cadence.n_steps))

    def warm_up(self, parts, ctx) -> None:
        """Before the first sampling step: the planned adaptation, timed apart (a hook: a
        task adds what it measures at step 0)."""
        c = parts.chains
        if c.runner.adapting and isinstance(c.runner.adaptation, PlannedAdaptation):
            with ctx.clock_paused():
                t0 = time.perf_counter()
                c.tune_steps = c.runner.warm_up()
                if ctx.device.type == "cuda":
                    torch.cuda.synchronize(ctx.device)
                c.tune_seconds = time.perf_counter() - t0

    def load_state_dict(self, parts, d: dict) -> None:
        if "chains" not in d and "sampler" in d:  # written before the runner (4bfdce4)
            d = self.legacy(parts, d)
        super().load_state_dict(parts, d)

    def legacy(self, parts, d: dict) -> dict:
        """This task's checkpoint from one of 4bfdce4: the chains (``chain``, or top-level
        keys), the sampler's state and the warm-up's cost (in ``tune`` or ``info``)."""
        cost = d.get("tune") or d.get("info") or {}
        tune = (cost.get("tune_steps", 0), cost.get("tune_seconds", 0.0))
        return {**d, "chains": parts.chains.legacy_state(d.get("chain", d), d["sampler"], tune)}

    record = None  # a function of the chain state: its value after each step goes to keep()

    def keep(self, parts, first: int, rows: Tensor) -> None:  # noqa: B027 - optional hook
        """``rows`` [n, ...]: :attr:`record` after loop steps ``first`` .. ``first + n - 1``."""

    def step(self, parts, step: int, ctx) -> dict:
        """Loop step ``step``: a block of one (the same numbers as any block)."""
        return self.steps(parts, step, 1, ctx)

    def steps(self, parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1`` as one block (the warm-up first at step
        1; on CUDA the loop calls this, and the runner captures it as a graph, issue 46): the
        sums of their per-step scalars, left on the device. A task with per-step outputs sets
        :attr:`record` (a bound method or function, the same every block) and gets its values
        after each step stacked [n, ...] in :meth:`keep`, once per block (no host read)."""
        if first == 1:
            self.warm_up(parts, ctx)
        sums = parts.chains.runner.run(n, self.record)
        sums.pop("steps")
        if self.record is not None:
            self.keep(parts, first, sums.pop("record"))
        return sums

    def chain_results(self, parts, ctx) -> dict:
        """What every sampling task reports beside the loop's sampler-cost block: the mean
        jump and the seconds of sampling, its warm-up included."""
        c = parts.chains
        return {"jump": ctx.totals.mean("jump"), "seconds": ctx.elapsed() + c.tune_seconds}
