# Ratio matching (RMwGGIS): synthetic density modelling (Table 1, 4; Fig. 1, 2, 4), time and
# memory (Table 5), RM / RMwGGIS on Ising learning (Table 3). Docs: docs/ratio_matching.md.
BENCH_EXTRA += bench_ratio_matching
comma := ,

.PHONY: table-rmwggis-synthetic
table-rmwggis-synthetic: $(STAMP) ## synthetic density MMD (Table 1, paper beside ours), RM objective (Table 4), heat maps (Fig. 1)
	$(SWEEP) experiment=rmwggis/table1_synthetic scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/table1_synthetic --scale $(SCALE)

.PHONY: table-rmwggis-synthetic-pcd
table-rmwggis-synthetic-pcd: $(STAMP) ## the synthetic densities trained by PCD with GWG / DMALA (ours), then the table above again
	$(SWEEP) experiment=rmwggis/table1_synthetic_pcd scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/table1_synthetic --scale $(SCALE)

.PHONY: fig-rmwggis-scaling
fig-rmwggis-scaling: $(STAMP) ## 256-bit 2spirals heat maps over training, RM / RMwGGIS / RMwRAND (Fig. 4) and s = 5..100 (Fig. 2)
	$(SWEEP) experiment=rmwggis/fig4_scaling_256 scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/fig4_scaling_256 --scale $(SCALE)
	$(SWEEP) experiment=rmwggis/fig2_s_256 scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/fig2_s_256 --scale $(SCALE)

# Table 5 is a benchmark (every (d, method) in a fresh process for its peak memory), not a sweep.
# It writes outputs/bench/ratio_matching.{md,json} (SCALE=smoke: ratio_matching_smoke), which
# `make reproduce CLAIMS=rmwggis` reads for the Table 5 claims.
.PHONY: bench-ratio-matching
bench-ratio-matching: $(STAMP) ## time + peak memory per batch, RM vs RMwGGIS on 2spirals, d = 32..2048 (Table 5)
	$(PY) -m benchmarks.bench_ratio_matching $(if $(filter smoke,$(SCALE)),--dims 32$(comma)64$(comma)128$(comma)256 --repeats 3 --out outputs/bench/ratio_matching_smoke) \
	  $(ARGS)

.PHONY: table-ising-learning-rm
table-ising-learning-rm: $(STAMP) ## RM and RMwGGIS on Ising learning, beside the PCD rows (RMwGGIS Table 3)
	$(SWEEP) experiment=rmwggis/table3_ising_learning scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/table3_ising_learning --scale $(SCALE)
