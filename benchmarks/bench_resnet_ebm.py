"""ResNet-EBM throughput (issue 7 "Performance"): sampler steps per second on the deep EBM.

For batch 100 (PCD) and 128 chains (mixing): steps per second of GWG, DULA, DMALA and ACS
(fixed schedule), their log_prob / gradient evaluations per step, and the cost of a step
relative to ONE forward+backward of the network measured in the same run (goal: DMALA about
1x, i.e. the cached gradient makes a step cost one forward+backward). Also: one PCD iteration
(``learner=pcd_buffer``, 40 DMALA steps, batch 100) and AIS temperatures per second
(GWG transitions, 100 chains).

    python -m benchmarks.bench_resnet_ebm [--device auto|cpu|cuda] [--width 64] [--steps 20]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from benchmarks.bench_samplers import _sync, time_forward_backward
from ebmlab.metrics.ais import linear_betas
from ebmlab.metrics.tempered_ais import tempered_ais_log_z
from ebmlab.models.resnet_ebm import TemperedEBM
from ebmlab.samplers.dlp import DMALA, DULA
from ebmlab.samplers.gwg import GWG

ROOT = Path(__file__).resolve().parents[1]


def _steps(sampler, model, x0, steps: int, gen) -> dict:
    state = sampler.init(model, x0)
    for _ in range(2):
        state, _ = sampler.step(model, state, gen)
    _sync(x0.device)
    n_lp = n_g = 0
    acc = 0.0
    t = time.perf_counter()
    for _ in range(steps):
        state, info = sampler.step(model, state, gen)
        n_lp, n_g = n_lp + info.n_log_prob, n_g + info.n_grad
        acc += float(info.accept_prob.float().mean())
    _sync(x0.device)
    return {"s": (time.perf_counter() - t) / steps, "lp": n_lp / steps, "g": n_g / steps,
            "acc": acc / steps}  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ais-temps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    dev = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    )
    torch.manual_seed(a.seed)
    node = OmegaConf.load(ROOT / "conf" / "model" / "resnet_ebm.yaml")
    model = instantiate(node, n_channels=a.width, dim=784).to(dev)
    model.set_base_mean(torch.full((784,), 0.13, device=dev))
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    hw = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"# ResNet EBM benchmark: width {a.width} ({n_params} parameters), {a.steps} steps, "
        f"device {dev} ({hw}), torch {torch.__version__}, threads {torch.get_num_threads()}\n"
    )
    print("| chains | sampler | steps/s | log_prob/step | grad/step | accept | "
          "step / (fwd+bwd) | fwd+bwd ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    samplers = {
        "GWG-1": lambda: GWG(n_flips=1),
        "DULA a=0.1": lambda: DULA(step_size=0.1, precond=None),
        "DMALA a=0.15": lambda: DMALA(step_size=0.15, precond=None),
        "ACS (fixed schedule)": lambda: instantiate(
            OmegaConf.load(ROOT / "conf" / "sampler" / "acs.yaml"),
            tune=False,
            alpha_max=2.0,
            alpha_min=0.15,
        ),
    }
    for n in (100, 128):
        x0 = model.sample_base(n, gen)
        fb = time_forward_backward(model, x0, max(3, a.steps // 2))
        for name, make in samplers.items():
            r = _steps(make(), model, x0, a.steps, gen)
            print(
                f"| {n} | {name} | {1 / r['s']:.2f} | {r['lp']:.0f} | {r['g']:.0f} | "
                f"{r['acc']:.2f} | {r['s'] / fb:.2f} | {fb * 1e3:.1f} |"
            )
    # one PCD iteration (40 DMALA steps, batch 100, replay buffer 10,000)
    learner = instantiate(OmegaConf.load(ROOT / "conf" / "learner" / "pcd_buffer.yaml"))
    data = model.sample_base(100, gen)
    learner.setup(model, data, gen, DMALA(step_size=0.15, precond=None))
    learner.update(model, data, gen)
    _sync(dev)
    t = time.perf_counter()
    reps = 2
    for _ in range(reps):
        learner.update(model, data, gen)
    _sync(dev)
    it = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    betas = linear_betas(a.ais_temps + 1)
    tempered_ais_log_z(TemperedEBM(model), GWG(n_flips=1), betas, 100, gen, False)
    _sync(dev)
    ais = (time.perf_counter() - t) / a.ais_temps
    print(
        f"\nPCD iteration (40 DMALA steps, batch 100): {it:.3f} s "
        f"(50,000 iterations: {it * 50000 / 3600:.1f} h)\n"
        f"AIS (GWG, 100 chains): {1 / ais:.1f} temperatures/s "
        f"(300,000 temperatures x 500 chains: about {ais * 5 * 300000 / 3600:.1f} h if linear)"
    )


if __name__ == "__main__":
    main()
