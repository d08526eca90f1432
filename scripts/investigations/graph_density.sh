#!/usr/bin/env bash
# Issue 13: are the smoke RMwGGIS graphs too dense because Eq. (3) learns p_data^(1/4)?
# The same smoke run under Eq. (3) and Hyvarinen's consistent form, advanced and basic estimators.
# Needs EBMLAB_DATA_DIR pointing at a folder holding citeseer/. Results: outputs/investigations/graph_density/.
set -euo pipefail
cd "$(dirname "$0")/../.."
for obj in eq3 hyvarinen; do
  for est in advanced basic; do
    python -m ebmlab.run experiment=rmwggis/table2_graphs scale=smoke learner.objective=$obj learner.variant=$est \
      seed=0 progress=false logger=none hydra.run.dir=outputs/investigations/graph_density/$obj-$est
  done
done
