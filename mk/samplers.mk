# Sampler benchmarks: AB ESS tables (AB Tables 1-5, Fig. 1-3) and the ACS 2-D toy (ACS Fig. 1).
# Docs: docs/samplers.md.
.PHONY: table-ab-ess
table-ab-ess: $(STAMP) ## AB ESS tables (AB Tables 1-5: ESS_n, ESS_t; RWM, Gibbs, LB, AB-*, DLP-trace) + (sigma, alpha) figures
	$(SWEEP) experiment=ab/tables1to5_ess scale=$(SCALE) $(ARGS) && $(REPORT) table ab/tables1to5_ess --scale $(SCALE)
	$(MAKE) --no-print-directory figure-ab-ess-grid

.PHONY: figure-ab-ess-grid
figure-ab-ess-grid: $(STAMP) ## AB Fig. 1-3: ESS over fixed (sigma, alpha) grids (Bernoulli, BLR, quartic mixture)
	$(SWEEP) experiment=ab/fig1_bernoulli_grid scale=$(SCALE) $(ARGS) && $(REPORT) table ab/fig1_bernoulli_grid --scale $(SCALE)
	$(SWEEP) experiment=ab/fig2_blr_grid scale=$(SCALE) $(ARGS) && $(REPORT) table ab/fig2_blr_grid --scale $(SCALE)
	$(SWEEP) experiment=ab/fig3_qmm_grid scale=$(SCALE) $(ARGS) && $(REPORT) table ab/fig3_qmm_grid --scale $(SCALE)

.PHONY: figure-acs-toy
figure-acs-toy: $(STAMP) ## ACS Fig. 1: 2-D multimodal toy, ground truth vs RW, DMALA, AB, ACS (+ table)
	$(SWEEP) experiment=acs/fig1_toy scale=$(SCALE) $(ARGS) && $(REPORT) table acs/fig1_toy --scale $(SCALE)
BENCH_EXTRA += bench_ab
