#!/usr/bin/env bash
# DLP Fig. 2 finding: GWG-6 accepts 0.49 with replacement (5.2 distinct flips) vs the paper's 0.43.
# GWG-6 with 6 distinct flips on the same 5x5 Ising, 50,000 steps, 3 seeds. Results: outputs/investigations/gwg6_distinct/.
set -euo pipefail
cd "$(dirname "$0")/../.."
for seed in 0 1 2; do
  python -m ebmlab.run experiment=dlp/fig3_ising_sampling sampler=gwg_distinct sampler.n_flips=6 seed=$seed \
    progress=false logger=none hydra.run.dir=outputs/investigations/gwg6_distinct/seed_$seed
done
