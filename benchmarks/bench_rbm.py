"""RBM 784x500 sampling and AIS throughput (issue "Performance" of the RBM tasks).

For 100 and 500 chains: steps per second of block Gibbs, GWG, DMALA and ACS (fixed schedule),
their log_prob / gradient evaluations per step, and each step's cost relative to its reference
operation:

- gradient samplers: one forward + backward of the RBM (``log_prob_and_grad``: W v + c,
  softplus, sigmoid(.) W); goal DMALA <= 1.3x;
- block Gibbs: its two matrix products plus the two Bernoulli draws, written out by hand;
  goal <= 1.2x.

AIS: temperatures per second of ``rbm_ais_log_z`` with 100 chains.

Step and reference are timed interleaved, per-round ratios summarised by median and quartiles
(benchmarks/harness.py).

    python -m benchmarks.bench_rbm [--device cpu|cuda] [--rounds 100] [--chains 100 500]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from benchmarks.harness import (
    CLOCKS,
    clocks_for,
    cuda_sync,
    describe,
    fmt_iqr,
    interleave,
    machine_info,
)
from ebmlab.metrics.ais import rbm_ais_log_z
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers.base import bernoulli
from ebmlab.samplers.block_gibbs import BlockGibbs
from ebmlab.samplers.dlp import DMALA
from ebmlab.samplers.gwg import GWG

GOALS = {"dmala": 1.3, "block_gibbs": 1.2}
ROOT = Path(__file__).resolve().parents[1]


def make_rbm(dev: torch.device) -> BernoulliRBM:
    g = torch.Generator().manual_seed(0)
    m = instantiate(OmegaConf.load(ROOT / "conf" / "model" / "rbm.yaml"), n_visible=784)
    with torch.no_grad():
        m.W.copy_(0.05 * torch.randn(m.W.shape, generator=g))
        m.b.copy_(-1.0 + 0.5 * torch.randn(m.b.shape, generator=g))
        m.c.copy_(0.1 * torch.randn(m.c.shape, generator=g))
    m = m.to(dev)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def bench_samplers(model, dev, chains: int, rounds: int, cpu_clock) -> list[dict]:
    """Each sampler's step against its reference, timed interleaved (benchmarks.harness)."""
    gen = torch.Generator(device=dev).manual_seed(0)
    x0 = (torch.rand(chains, 784, generator=gen, device=dev) < 0.2).float()
    xs = x0.clone()

    def fwd_bwd():
        model.log_prob_and_grad(xs)

    W, b, c = model.W, model.b, model.c

    @torch.no_grad()
    def two_matmuls():
        h = bernoulli(torch.sigmoid(xs @ W.t() + c), gen)
        bernoulli(torch.sigmoid(h @ W + b), gen)

    samplers = {
        "block_gibbs": BlockGibbs(n_sweeps=1),
        "gwg": GWG(n_flips=1),
        "dmala": DMALA(0.2, precond=None),
        "acs": instantiate(
            OmegaConf.load(ROOT / "conf" / "sampler" / "acs.yaml"),
            tune=False,
            alpha_max=2.0,
            alpha_min=0.2,
        ),
    }
    refs = {name: "two_matmuls" if name == "block_gibbs" else "fwd_bwd" for name in samplers}
    ops = {"fwd_bwd": fwd_bwd, "two_matmuls": two_matmuls}
    boxes = {}
    for name, s in samplers.items():
        box = boxes[name] = {"state": s.init(model, x0)}

        def one(s=s, box=box):
            box["state"], box["info"] = s.step(model, box["state"], gen)

        ops[name] = one
    res = interleave(
        ops,
        {name: (name, refs[name]) for name in samplers},
        rounds=rounds,
        sync=cuda_sync(dev),
        cpu_clock=cpu_clock,
    ).summary()
    rows = []
    for name in samplers:
        info = boxes[name]["info"]
        t, ref = res["ops"][name], res["ops"][refs[name]]
        rows.append(
            {
                "sampler": name,
                "chains": chains,
                "steps_per_s": {k: 1.0 / t[k]["median"] for k in CLOCKS},
                "ms_per_step": {k: 1e3 * t[k]["median"] for k in CLOCKS},
                "log_prob_evals": info.n_log_prob,
                "grad_evals": info.n_grad,
                "ref": "2 matmuls + draws" if name == "block_gibbs" else "fwd+bwd",
                "ref_ms": {k: 1e3 * ref[k]["median"] for k in CLOCKS},
                "ratio": {k: res["ratios"][name][k] for k in CLOCKS},
                "goal": GOALS.get(name),
            }
        )
    return rows


def bench_ais(model, dev, n_temps: int, chains: int) -> dict:
    gen = torch.Generator(device=dev).manual_seed(0)
    W, b, c = model.parameters_for_ais()
    sync = cuda_sync(dev) or (lambda: None)
    rbm_ais_log_z(W, b, c, b, 20, chains, gen)  # warm-up
    sync()
    t0 = time.perf_counter()
    rbm_ais_log_z(W, b, c, b, n_temps, chains, gen)
    sync()
    sec = time.perf_counter() - t0
    return {"chains": chains, "temps": n_temps, "temps_per_s": n_temps / sec, "seconds": sec}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", "--steps", type=int, default=100, help="interleaved rounds")
    ap.add_argument("--chains", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--ais-temps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    primary, cpu_clock = clocks_for(dev)
    other = "wall" if primary == "cpu" else "cpu"
    hw = describe(machine_info(dev))
    model = make_rbm(dev)
    print(f"### RBM 784x500 sampling throughput\n\n{hw}; float32.\n")
    print(
        f"Each step is timed against its reference interleaved over {a.rounds} rounds "
        "(benchmarks/harness.py); times and ratios are medians [25th, 75th percentile] over "
        f"rounds, by {primary} time ({other} time in the last column).\n"
    )
    print(
        "| sampler | chains | steps/s | ms/step | log_prob evals | grad evals | reference |"
        f" ref ms | step / ref | goal | step / ref ({other}) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for ch in a.chains:
        for r in bench_samplers(model, dev, ch, a.rounds, cpu_clock):
            goal = f"<= {r['goal']}" if r["goal"] else ""
            print(
                f"| {r['sampler']} | {r['chains']} | {r['steps_per_s'][primary]:.1f}"
                f" | {r['ms_per_step'][primary]:.3f}"
                f" | {r['log_prob_evals']} | {r['grad_evals']} | {r['ref']}"
                f" | {r['ref_ms'][primary]:.3f} | {fmt_iqr(r['ratio'][primary])} | {goal}"
                f" | {fmt_iqr(r['ratio'][other])} |"
            )
    print(
        "\nBlock Gibbs reports 0 log_prob/grad evaluations: it costs two matrix products per "
        "step (its log p~ comes free from the cached hidden logits).\n"
    )
    r = bench_ais(model, dev, a.ais_temps, 100)
    print(f"### RBM AIS throughput\n\n{hw}; wall time.\n")
    print("| chains | temperatures | seconds | temperatures/s |")
    print("|---|---|---|---|")
    print(f"| {r['chains']} | {r['temps']} | {r['seconds']:.2f} | {r['temps_per_s']:.0f} |")
    print(f"\n100,000 temperatures (ACS App. D.4) take about {1e5 / r['temps_per_s']:.0f} s here.")


if __name__ == "__main__":
    main()
