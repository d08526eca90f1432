"""GRBM sampler throughput (GRBM paper, Fig. 1 and Table 1 models).

Per step, for Gibbs, Langevin and Gibbs-Langevin (without the Metropolis test, as in the
"wo. adjust" settings, and with it), on the Fig. 1 GRBM (2 visible, 256 hidden, 100 chains)
and an MNIST-sized GRBM (784 visible, 4,096 hidden, 100 chains): microseconds per step and
the step's cost relative to one hidden-logits evaluation W^T (v / var) + b, the matrix product
every GRBM step needs. Samplers are built from ``conf/sampler/``; their step sizes are those of
the Fig. 1 settings (conf/grbm_gmm_setting/). Timed interleaved, per-round ratios summarised
by median and quartiles (benchmarks/harness.py).

    python -m benchmarks.bench_grbm [--rounds 50] [--name grbm]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from omegaconf import OmegaConf

from benchmarks.harness import describe, fmt_iqr, interleave, machine_info, write_report
from ebmlab.utils.config import build

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"Fig. 1 GMM (2 x 256)": (2, 256), "MNIST size (784 x 4096)": (784, 4096)}
CHAINS = 100


def setting(name: str) -> dict:
    """The sampler overrides of conf/grbm_gmm_setting/<name>.yaml."""
    return dict(OmegaConf.load(ROOT / "conf" / "grbm_gmm_setting" / f"{name}.yaml").sampler)


def sampler(group: str, **overrides):
    node = OmegaConf.load(ROOT / "conf" / "sampler" / f"{group}.yaml")
    return build(OmegaConf.merge(node, overrides), "sampler")


def samplers() -> dict:
    """The Fig. 1 settings' samplers; the "no test" one never reaches its test (in the runs
    its ``adjust_step`` is the chain length, and the benchmark's chain is longer)."""
    gl_wo = setting("gibbs_langevin_wo_adjust") | {"adjust_step": 10**9}
    gl_w, lv_w = setting("gibbs_langevin_w_adjust"), setting("langevin_w_adjust")
    return {
        "Gibbs": sampler("grbm_gibbs"),
        "Langevin, adjusted": sampler("grbm_langevin", **lv_w),
        "Gibbs-Langevin, no test": sampler("grbm_gibbs_langevin", **gl_wo),
        "Gibbs-Langevin, adjusted": sampler("grbm_gibbs_langevin", **gl_w),
    }


def model(d: int, h: int):
    node = OmegaConf.load(ROOT / "conf" / "model" / "grbm.yaml")
    m = build(OmegaConf.merge(node, {"n_visible": d, "n_hidden": h}), "model")
    return m.requires_grad_(False)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--name", default="grbm")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    info = machine_info("cpu")
    rows, data = [], {"machine": info, "models": {}}
    for label, (d, h) in MODELS.items():
        m = model(d, h)
        g = torch.Generator().manual_seed(0)
        x0 = torch.randn(CHAINS, d, generator=g)
        ops = {"hidden logits": lambda m=m, x=x0: m.hidden_logits(x)}
        for name, s in samplers().items():
            box = {"state": s.init(m, x0.clone())}

            def step(s=s, box=box, m=m, g=g):
                box["state"], _ = s.step(m, box["state"], g)

            ops[name] = step
        ratios = {n: (n, "hidden logits") for n in ops if n != "hidden logits"}
        res = interleave(ops, ratios, rounds=a.rounds).summary()
        data["models"][label] = res
        for n in ratios:
            us = res["ops"][n]["cpu"]["median"] * 1e6
            rows.append(f"| {label} | {n} | {us:,.0f} | {fmt_iqr(res['ratios'][n]['cpu'])} |")
    md = "\n".join(
        [
            "# GRBM sampler steps",
            "",
            f"`python -m benchmarks.bench_grbm --rounds {a.rounds}`: {CHAINS} chains, thread CPU "
            "time, 1 thread; " + describe(info) + ".",
            "",
            "| model | sampler | us / step (median) | step / hidden logits, median [p25, p75] |",
            "|---|---|---|---|",
            *rows,
        ]
    )
    md_path, _ = write_report(ROOT / "outputs" / "bench" / a.name, md + "\n", data)
    print(md)
    print(f"\nwritten: {md_path}")


if __name__ == "__main__":
    main()
