#!/usr/bin/env bash
# DLP Fig. 2 finding: GWG-6 accepts 0.49 with replacement (5.2 distinct flips) vs the paper's 0.43.
# GWG-6 with 6 distinct flips on the same 5x5 Ising, 50,000 steps, 3 seeds, with the fixed sampler
# (conf/sampler/gwg_distinct.yaml: a GWG-1 move with probability 0.1 makes the chain ergodic; the
# first version of this run flipped 6 distinct coordinates every step, a reducible chain).
# Per-move acceptance: scripts/investigations/gwg6_distinct_acceptance.py.
# Results: outputs/runs/gwg6_distinct_fixed/. (On a loaded 2-core CPU set OMP_NUM_THREADS=1.)
set -euo pipefail
cd "$(dirname "$0")/../.."
for seed in 0 1 2; do
  python -m ebmlab.run experiment=dlp/fig3_ising_sampling scale=paper sampler=gwg_distinct seed=$seed \
    progress=false logger=none hydra.run.dir=outputs/runs/gwg6_distinct_fixed/seed_$seed
done
