#!/usr/bin/env bash
# AB Sec. 5.3 finding (ab-qmm-trace-best-ess_n): on our quartic-mixture reconstruction every AB sampler
# stays at its uniform random start, its jump-distance tuning driven by ties to the alpha cap. Does the
# paper's chosen AB-trace configuration, (sigma, alpha) = (415, 0.92) fixed with no adaptation, move the
# chains from the same starts? Same declared shorter run as the report (20,000 burn-in + 20,000 sampling
# steps), seed 0. Results: outputs/investigations/ab_qmm_fixed/.
set -euo pipefail
cd "$(dirname "$0")/../.."
python -m ebmlab.run experiment=ab/tables1to5_ess scale=paper ab_target=qmm sampler=ab_trace task.n_steps=40000 \
  seed=0 progress=false logger=none sampler.adapt=false sampler.sigma=415 sampler.alpha=0.92 \
  hydra.run.dir=outputs/investigations/ab_qmm_fixed/fixed_paper_point
