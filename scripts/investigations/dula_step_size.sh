#!/usr/bin/env bash
# DLP Fig. 3 finding: DULA (unadjusted) floors at a log-RMSE set by its step size. The paper's alpha 0.2 vs
# smaller steps on the same 5x5 Ising at 50,000 steps (seed 0). Results: outputs/investigations/dula_step/.
set -euo pipefail
cd "$(dirname "$0")/../.."
for a in 0.1 0.05; do
  python -m ebmlab.run experiment=dlp/fig3_ising_sampling sampler=dula sampler.step_size=$a run.n_steps=50000 \
    seed=0 progress=false logger=none hydra.run.dir=outputs/investigations/dula_step/alpha_$a
done
