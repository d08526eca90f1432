"""Throughput of the core discrete samplers (Gibbs-1, GWG, DULA, DMALA).

Targets: (a) a 25x25 periodic lattice Ising (analytic gradient), (b) an RBM-shaped
energy f(x) = sum softplus(W x + c) + b.x with 784 visible x 500 hidden units, with
autograd and with an analytic gradient. For each: steps/second, log_prob and
gradient evaluations per step, and the cost of a step relative to ONE
forward+backward of the model measured in the same run (goal for DMALA / GWG:
1 forward + 1 backward per step, ratio <= 1.3).

    python benchmarks/bench_samplers.py [--device auto|cpu|cuda] [--steps 200] [--chains 100]
"""

from __future__ import annotations

import argparse
import platform
import time

import torch
from torch import Tensor
from torch.nn import functional as F

from ebmlab.models.base import EnergyModel
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.dlp import DMALA, DULA
from ebmlab.samplers.gibbs import RandomScanGibbs
from ebmlab.samplers.gwg import GWG


class RBMEnergy(EnergyModel):
    """f(x) = sum softplus(W x + c) + b.x (visible marginal of a binary RBM)."""

    def __init__(self, n_visible: int = 784, n_hidden: int = 500, analytic: bool = False):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.dim = n_visible
        self.analytic = analytic
        self.W = torch.nn.Parameter(torch.randn(n_hidden, n_visible, generator=g) * 0.05)
        self.b = torch.nn.Parameter(torch.randn(n_visible, generator=g) * 0.1)
        self.c = torch.nn.Parameter(torch.randn(n_hidden, generator=g) * 0.1)
        if analytic:
            self.log_prob_and_grad = self._log_prob_and_grad

    def log_prob(self, x: Tensor) -> Tensor:
        return F.softplus(x @ self.W.T + self.c).sum(-1) + x @ self.b

    def _log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            pre = x @ self.W.T + self.c
            lp = F.softplus(pre).sum(-1) + x @ self.b
            return lp, torch.sigmoid(pre) @ self.W + self.b


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_forward_backward(model, x: Tensor, reps: int) -> float:
    """Seconds for one value_and_grad (forward + backward) on the batch x."""
    for _ in range(3):
        value_and_grad(model, x)
    _sync(x.device)
    t = time.perf_counter()
    for _ in range(reps):
        value_and_grad(model, x)
    _sync(x.device)
    return (time.perf_counter() - t) / reps


def time_forward(model, x: Tensor, reps: int) -> float:
    with torch.no_grad():
        for _ in range(3):
            model.log_prob(x)
        _sync(x.device)
        t = time.perf_counter()
        for _ in range(reps):
            model.log_prob(x)
        _sync(x.device)
    return (time.perf_counter() - t) / reps


def bench_sampler(sampler, model, x0: Tensor, steps: int, seed: int) -> dict:
    gen = torch.Generator(device=x0.device).manual_seed(seed)
    state = sampler.init(model, x0)
    for _ in range(5):  # warm-up
        state, _ = sampler.step(model, state, gen)
    _sync(x0.device)
    n_lp = n_g = 0
    acc = 0.0
    t = time.perf_counter()
    for _ in range(steps):
        state, info = sampler.step(model, state, gen)
        n_lp += info.n_log_prob
        n_g += info.n_grad
        acc += float(info.accept_prob.mean())  # forces a sync on CUDA, as a real run logs
    _sync(x0.device)
    dt = (time.perf_counter() - t) / steps
    return {"step_s": dt, "lp": n_lp / steps, "grad": n_g / steps, "acc": acc / steps}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda[:i]")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)

    from ebmlab.models.ising import LatticeIsing

    models = {
        "ising 25x25 (analytic)": LatticeIsing(n_side=25, sigma=0.25, bias=0.0),
        "rbm 784x500 (autograd)": RBMEnergy(analytic=False),
        "rbm 784x500 (analytic)": RBMEnergy(analytic=True),
    }
    samplers = {
        "Gibbs-1": RandomScanGibbs,
        "GWG-1": lambda: GWG(n_flips=1),
        "DULA a=0.1": lambda: DULA(step_size=0.1, precond=None),
        "DMALA a=0.2": lambda: DMALA(step_size=0.2, precond=None),
    }
    hw = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    print(
        f"# sampler benchmark: {args.chains} chains, {args.steps} steps, device {device} "
        f"({hw or 'cpu'}), torch {torch.__version__}, threads {torch.get_num_threads()}\n"
    )
    print(
        "| model | sampler | steps/s | log_prob/step | grad/step | accept | "
        "step / (fwd+bwd) | fwd+bwd ms | fwd ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mname, model in models.items():
        model = model.to(device)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        x0 = (torch.rand(args.chains, model.dim, generator=gen, device=device) < 0.5).float()
        reps = max(20, args.steps // 2)
        fb = time_forward_backward(model, x0, reps)
        fw = time_forward(model, x0, reps)
        for sname, make in samplers.items():
            r = bench_sampler(make(), model, x0, args.steps, args.seed)
            print(
                f"| {mname} | {sname} | {1 / r['step_s']:.0f} | {r['lp']:.0f} | {r['grad']:.0f} "
                f"| {r['acc']:.2f} | {r['step_s'] / fb:.2f} | {fb * 1e3:.3f} | {fw * 1e3:.3f} |"
            )


if __name__ == "__main__":
    main()
