"""Hamming-ball sampler HB-k-l (Titsias & Yau 2017; DLP's "HB-10-1" baseline).

One step, per chain:
  1. choose a block B of ``block_size`` = k distinct coordinates uniformly at random;
  2. draw an auxiliary u uniformly from the Hamming ball of radius ``radius`` = l
     around x restricted to B (u agrees with x outside B and differs from x in at
     most l coordinates of B);
  3. draw x' from the target restricted to the ball around u: q(x'|u) proportional
     to p(x') 1[x' in H_l(u)].

All balls have the same size |H| = sum_{j<=l} C(k, j) (S-1)^j, so steps 2-3 are a
Gibbs update of the joint p(x) U(u|x) and leave p invariant without an MH test
(Titsias & Yau 2017, Sec. 2). The |H| ball states are evaluated as ONE batched
log_prob call of [chains * |H|, d]. Works on binary (S = 2: a change is a flip)
and ordinal {0..S-1}^d models (a change sets a coordinate to any other value).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.samplers.base import ChainState, Sampler, StepInfo
from ebmlab.samplers.locally_balanced import batched_log_prob, check_chunk_size
from ebmlab.samplers.proposals import sample_categorical
from ebmlab.samplers.spaces import BINARY, ORDINAL, state_space

MAX_BALL = 1 << 16  # refuse balls larger than this (memory: chains * |H| * d)


def ball_size(k: int, l: int, S: int) -> int:
    return sum(math.comb(k, j) * (S - 1) ** j for j in range(min(k, l) + 1))


def ball_offsets(k: int, l: int, S: int) -> Tensor:
    """All offset patterns [|H|, k] (long, entries in 0..S-1, at most l non-zero).

    The ball around u (within the block) is {(u + o) mod S : o a pattern}; the
    pattern set is closed under o -> (-o) mod S, so x in H(u) iff u in H(x).
    """
    rows = []
    for j in range(min(k, l) + 1):
        for pos in itertools.combinations(range(k), j):
            for vals in itertools.product(range(1, S), repeat=j):
                o = [0] * k
                for p, v in zip(pos, vals, strict=True):
                    o[p] = v
                rows.append(o)
    return torch.tensor(rows, dtype=torch.long)


class HammingBall(Sampler):
    """HB-k-l: random block of k coordinates, auxiliary ball of radius l (always accepts).

    chunk_size: at most this many ball states per log_prob call (null: one batched call).
    """

    needs_grad = False
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def __init__(self, block_size: int, radius: int, chunk_size: int | None):
        for name, v in (("block_size", block_size), ("radius", radius)):
            check(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                name,
                f"must be an integer >= 1 (got {v!r})",
            )
        check(radius <= block_size, "radius", f"must be <= block_size (got {radius!r})")
        check(
            ball_size(block_size, radius, 2) <= MAX_BALL,
            "radius",
            f"ball of C({block_size}, <={radius}) states exceeds {MAX_BALL} (got {radius!r})",
        )
        self.block_size = block_size
        check_chunk_size(chunk_size)
        self.radius = radius
        self.chunk_size = chunk_size
        self._offsets: dict[tuple[int, str], Tensor] = {}

    def offsets(self, S: int, device) -> Tensor:
        key = (S, str(device))
        if key not in self._offsets:
            size = ball_size(self.block_size, self.radius, S)
            if size > MAX_BALL:
                raise ValueError(
                    f"HB-{self.block_size}-{self.radius} ball has {size} states for S={S} "
                    f"(limit {MAX_BALL}); use a smaller block_size or radius"
                )
            self._offsets[key] = ball_offsets(self.block_size, self.radius, S).to(device)
        return self._offsets[key]

    def n_ball(self, model) -> int:
        """Batched log_prob evaluations per step, |H|."""
        return ball_size(self.block_size, self.radius, state_space(model, self)[1])

    def step(self, model, state: ChainState, generator: torch.Generator):
        kind, S = state_space(model, self)
        shape = state.x.shape
        n = shape[0]
        x = state.x.reshape(n, -1)
        D, k = x.shape[1], self.block_size
        if k > D:
            raise ValueError(f"block_size {k} exceeds the model dimension {D}")
        dev = x.device
        off = self.offsets(S, dev)  # [H, k]
        H = off.shape[0]
        rows = torch.arange(n, device=dev)
        # 1. uniformly random block: the k smallest of D iid uniform keys
        block = torch.rand(n, D, generator=generator, device=dev).argsort(1)[:, :k]  # [n, k]
        xb = x.gather(1, block).round().long()  # [n, k]
        # 2. u uniform in the ball around x (within the block)
        pick = torch.randint(0, H, (n,), generator=generator, device=dev)
        ub = torch.remainder(xb + off[pick], S)
        # 3. every state of the ball around u, scored in one batched call
        cand = torch.remainder(ub[:, None, :] + off[None], S).to(x.dtype)  # [n, H, k]
        Y = x[:, None, :].repeat(1, H, 1)
        Y.scatter_(2, block[:, None, :].expand(n, H, k), cand)
        lp = batched_log_prob(model, Y.reshape(n * H, *shape[1:]), self.chunk_size).reshape(n, H)
        wide = torch.promote_types(lp.dtype, torch.float32)
        choice = sample_categorical(lp.to(wide), generator)
        x_new = Y[rows, choice]
        new = ChainState(x=x_new.reshape(shape), log_prob=lp[rows, choice], extra=state.extra)
        ones = torch.ones(n, device=dev)
        info = StepInfo(
            accept_prob=ones,
            accepted=ones.bool(),
            jump=(x_new - x).abs().sum(-1),
            n_log_prob=H,
            n_grad=0,
        )
        return new, info
