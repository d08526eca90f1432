"""AIS temperatures as chain-runner steps with the schedule on the device (issue 46).

One step of :class:`RBMAISStep` at temperature k adds the log-weight increment
f_{b_k}(v) - f_{b_{k-1}}(v) to the chains' log weights and then moves them with the transition
at b_k (block Gibbs of the intermediate RBM, Salakhutdinov & Murray 2008, Sec. 4.1). The
schedule (float64), the temperature index and the log weights (float64) are device tensors in
the chain state, so a block of temperatures is one ``ChainRunner.run(n)``: it reads nothing
back and is captured as a CUDA graph on a GPU. The arithmetic is the one the per-temperature
loop did with Python floats (a float64 beta, cast to the chains' dtype where it multiplies
them), so the estimate is bit-identical.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Generator, Tensor

from ebmlab.core.state import ChainState, StepInfo

BLOCK = 100  # temperatures per ChainRunner.run call (a captured graph's length on a GPU)


def schedule_state(x: Tensor, betas: list[float], **extra: Tensor) -> ChainState:
    """The chains at temperature index 0 with zero log weights and the schedule on x's
    device (float64, the same numbers as ``betas``)."""
    dev = x.device
    return ChainState(
        x=x,
        log_prob=None,
        extra={
            "betas": torch.tensor(betas, dtype=torch.float64, device=dev),
            "k": torch.zeros((), dtype=torch.int64, device=dev),
            "log_w": torch.zeros(x.shape[0], dtype=torch.float64, device=dev),
            **extra,
        },
    )


def betas_at(state: ChainState) -> tuple[Tensor, Tensor, Tensor]:
    """(b_{k-1}, b_k, k) for the step from the state's index k - 1 to k (0-dim device
    tensors; k is the index after the step)."""
    k = state.extra["k"] + 1
    pair = state.extra["betas"].index_select(0, torch.stack([k - 1, k]))
    return pair[0], pair[1], k


def rbm_increment(v: Tensor, a: Tensor, vb_diff: Tensor, b_prev: Tensor, b_cur: Tensor) -> Tensor:
    """f_{b_cur}(v) - f_{b_prev}(v) of the intermediate RBMs (float64 [n]); ``a`` = W v + c.
    Softplus in float64 so the small difference of two large sums keeps its precision."""
    a64 = a.to(torch.float64)
    inc = (b_cur - b_prev) * (v @ vb_diff).to(torch.float64)
    return inc + (F.softplus(b_cur * a64) - F.softplus(b_prev * a64)).sum(-1)


class RBMAISStep:
    """One AIS temperature of an RBM (a kernel for the chain runner): the log-weight increment
    at the next temperature b_k, then h ~ p_{b_k}(h|v), v ~ p_{b_k}(v|h)."""

    state_spaces, exact = ("binary",), True

    def __init__(self, W: Tensor, b: Tensor, c: Tensor, base_b: Tensor):
        self.W, self.b, self.c, self.base_b = W, b, c, base_b
        self.vb_diff = b - base_b  # f_beta's visible term is base_b.v + beta (b - base_b).v

    def weigh(self, state: ChainState) -> tuple[Tensor, Tensor, Tensor]:
        """(log weights after the increment to the next temperature, b_k, W v + c)."""
        v = state.x
        b_prev, b_cur, _ = betas_at(state)
        a = v @ self.W.T + self.c
        return state.extra["log_w"] + rbm_increment(v, a, self.vb_diff, b_prev, b_cur), b_cur, a

    def step(self, model, state: ChainState, gen: Generator) -> tuple[ChainState, StepInfo]:
        v = state.x
        log_w, beta, a = self.weigh(state)
        h = torch.bernoulli(torch.sigmoid(beta.to(a.dtype) * a), generator=gen)
        logits_v = (1.0 - beta).to(v.dtype) * self.base_b + beta.to(v.dtype) * (h @ self.W + self.b)
        new = torch.bernoulli(torch.sigmoid(logits_v), generator=gen)
        extra = {**state.extra, "k": state.extra["k"] + 1, "log_w": log_w}
        ones = torch.ones(v.shape[0], device=v.device)
        jump = (new != v).sum(-1)
        return ChainState(x=new, log_prob=None, extra=extra), StepInfo(
            ones, ones.bool(), jump, 0, 0
        )

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:
        pass


def run_temperatures(runner, n: int, progress=None) -> None:
    """``n`` temperatures as ``runner.run`` blocks of :data:`BLOCK`; ``progress``: a tqdm bar."""
    done = 0
    while done < n:
        m = min(BLOCK, n - done)
        runner.run(m)
        done += m
        if progress is not None:
            progress.update(m)


class TemperedAISStep:
    """One AIS temperature of a tempered density f_b = base + b net (``tempered``, e.g.
    :class:`~ebmlab.models.resnet_ebm.TemperedEBM`) with any ``sampler`` that evaluates its
    proposals through ``net_value_and_grad`` (GWG, DMALA): the log-weight increment to b_k from
    the chains' cached net (``extra["net"]``; none where b_k = b_{k-1}), then one sampler step
    on f_{b_k}, whose b_k the step writes into ``tempered.beta`` (a device tensor) in place;
    accepted proposals hand their net and gradient on (one forward + backward per step)."""

    def __init__(self, tempered, sampler):
        self.tempered, self.sampler = tempered, sampler

    def weigh(self, state: ChainState) -> tuple[Tensor, Tensor]:
        """(log weights after the increment to the next temperature, b_k)."""
        b_prev, b_cur, _ = betas_at(state)
        base = self.tempered.model.base_log_prob(state.x)
        diff = (base + state.extra["net"]).to(torch.float64) - base.to(torch.float64)
        db = b_cur - b_prev
        inc = torch.where(db != 0, db * diff, torch.zeros_like(diff))
        return state.extra["log_w"] + inc, b_cur

    def step(self, model, state: ChainState, gen: Generator) -> tuple[ChainState, StepInfo]:
        t = self.tempered
        log_w, beta = self.weigh(state)
        t.beta.copy_(beta)
        x, net, gnet = state.x, state.extra["net"], state.extra["gnet"]
        lp, g = t.combine(x, net, gnet)
        t.last = None
        new, info = self.sampler.step(t, ChainState(x=x, log_prob=lp, grad=g), gen)
        y = new.x
        if t.last is not None:  # proposal evaluated: take its values where accepted
            py, ny, gy = t.last
            took = (y.reshape(y.shape[0], -1) == py.reshape(py.shape[0], -1)).all(-1)
            net = torch.where(took, ny, net)
            gnet = torch.where(took.view(-1, *([1] * (gnet.dim() - 1))), gy, gnet)
        t.last = None  # nothing of this block left on the model
        extra = {**state.extra, "k": state.extra["k"] + 1, "log_w": log_w}
        extra.update(net=net, gnet=gnet)
        return ChainState(x=y, log_prob=None, extra=extra), info

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:
        pass
