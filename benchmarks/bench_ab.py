"""Benchmark the AB samplers (ebmlab.samplers.ab) on a periodic 20x20 Ising grid.

Prints a markdown table per sampler: tuned (sigma, alpha), acceptance, mean Hamming jump,
seconds per step after burn-in, ESS of the Hamming distance to a fixed random reference state
(DISCS summary, mean over chains) per 10,000 log-prob queries (ESS_n) and per second (ESS_t),
and the one-off setup cost of the quadratic samplers (W estimation, SDP for D, square root).
Defaults are a CPU-sized reduction of the paper's protocol (100 chains, 100,000 steps,
20,000 burn-in); ``--paper`` uses the paper's sizes.

    python benchmarks/bench_ab.py [--coupling 0.4407] [--chains 100] [--steps 4000]
                                  [--burn-in 6000] [--n-probe 50] [--threads 2]
                                  [--device cpu] [--paper]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from ebmlab.metrics.ess import ess_1d, hamming_to_reference  # noqa: E402
from ebmlab.models.ising import LatticeIsing  # noqa: E402
from ebmlab.samplers.dlp import DMALA  # noqa: E402

CONF = Path(__file__).resolve().parents[1] / "conf" / "sampler"


def _sampler(name: str, **overrides):
    """conf/sampler/<name>.yaml with ``overrides``."""
    return instantiate(OmegaConf.load(CONF / f"{name}.yaml"), **overrides)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coupling", type=float, default=0.4407, help="J per edge (AB App. B.2)")
    ap.add_argument("--side", type=int, default=20)
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--steps", type=int, default=4000, help="steps after burn-in")
    ap.add_argument("--burn-in", type=int, default=6000)
    ap.add_argument("--n-probe", type=int, default=50, help="Alg. 4 buffer N (paper: 100)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--paper", action="store_true", help="100 chains, 80,000 + 20,000 steps")
    a = ap.parse_args()
    if a.paper:
        a.chains, a.steps, a.burn_in, a.n_probe = 100, 80000, 20000, 100
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    # LatticeIsing counts each edge twice (s^T J s): sigma = J / 2 gives J per edge.
    model = LatticeIsing(n_side=a.side, sigma=a.coupling / 2, bias=0.0).to(dev)
    d = model.dim
    samplers = {
        "DMALA (0.2)": DMALA(0.2, precond=None),
        "AB-1st": _sampler("ab_1st", burn_in=a.burn_in, n_probe=a.n_probe),
        "AB-shift": _sampler("ab_shift", burn_in=a.burn_in, n_probe=a.n_probe),
        "AB-max": _sampler("ab_max", burn_in=a.burn_in, n_probe=a.n_probe),
        "AB-trace": _sampler("ab_trace", burn_in=a.burn_in, n_probe=a.n_probe),
        "DLP-trace": _sampler("dlp_trace", burn_in=a.burn_in, n_probe=a.n_probe),
    }
    print(
        f"# AB samplers on a {a.side}x{a.side} periodic Ising grid, J = {a.coupling}, d = {d}\n"
        f"{a.chains} chains, {a.burn_in} burn-in (N = {a.n_probe}) + {a.steps} steps, "
        f"device {dev}, "
        f"{a.threads} threads, {platform.processor() or platform.machine()}\n"
    )
    print(
        "| sampler | sigma | alpha | accept | jump | ms/step | ESS_n | ESS_t | setup s "
        "(W / SDP / sqrt) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, s in samplers.items():
        gen = torch.Generator(device=dev).manual_seed(a.seed)
        x = torch.randint(0, 2, (a.chains, d), generator=gen, device=dev).float()
        ref = torch.randint(0, 2, (d,), generator=gen, device=dev).float()
        state = s.init(model, x)
        for _ in range(a.burn_in):
            state, _ = s.step(model, state, gen)
        hams, acc, jump, n_lp = [], 0.0, 0.0, 0
        t0 = time.perf_counter()
        for _ in range(a.steps):
            state, info = s.step(model, state, gen)
            hams.append(hamming_to_reference(state.x, ref))
            acc += float(info.accept_prob.mean())
            jump += float(info.jump.float().mean())
            n_lp += info.n_log_prob
        if dev.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        ess = float(ess_1d(torch.stack(hams).cpu()).mean())
        sig = getattr(s, "sigma", getattr(s, "step_size", float("nan")))
        alp = getattr(s, "alpha", 0.5)
        st = getattr(s, "setup_stats", {})
        setup = (
            f"{st.get('w_seconds', 0):.3f} / {st.get('sdp_seconds', 0):.3f} / "
            f"{st.get('sqrt_seconds', 0):.3f}"
            if st
            else "-"
        )
        print(
            f"| {name} | {sig:.4g} | {alp:.3g} | {acc / a.steps:.3f} | {jump / a.steps:.2f} | "
            f"{1e3 * secs / a.steps:.2f} | {ess / n_lp * 1e4:.1f} | {ess / secs:.1f} | {setup} |"
        )


if __name__ == "__main__":
    main()
