#!/usr/bin/env bash
# AB Sec. 5.3 finding (ab-qmm-trace-best-ess_n): on our quartic-mixture reconstruction every AB sampler
# stays at its uniform random start, its jump-distance tuning driven by ties to the alpha cap.
# (1) Does the paper's chosen AB-trace configuration, (sigma, alpha) = (415, 0.92) fixed with no
#     adaptation, move the chains from the same starts?
# (2) Do AB-1st and AB-trace, adapting as in the report's runs, mix when the chains start where LB (DMALA
#     tuned to acceptance 0.574) ended its run (task.init=run:<dir>)? That separates "the start" from "the target".
# Same declared shorter run as the report (20,000 burn-in + 20,000 sampling steps), seed 0.
# Results: outputs/investigations/ab_qmm/.
set -euo pipefail
cd "$(dirname "$0")/../.."
common=(experiment=ab/tables1to5_ess scale=paper ab_target=qmm run.n_steps=40000 seed=0 progress=false
  logger=none)
python -m ebmlab.run "${common[@]}" sampler=ab_trace sampler.adapt=false sampler.sigma=415 sampler.alpha=0.92 \
  hydra.run.dir=outputs/investigations/ab_qmm/fixed_paper_point
lb=outputs/multirun/ab/tables1to5_ess/paper/ab_target=qmm,sampler=dmala,seed=0,run.n_steps=40000
for s in ab_1st ab_trace; do
  python -m ebmlab.run "${common[@]}" sampler=$s "task.init='run:$lb'" \
    hydra.run.dir=outputs/investigations/ab_qmm/from_lb_$s
done
