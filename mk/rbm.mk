# RBM sampling (DLP Fig. 4; ACS Fig. 4, 6, 9) and RBM learning (ACS Table 1). Docs: docs/rbm.md.
# The dataset files must exist under $EBMLAB_DATA_DIR (default data/); ARGS='dataset=caltech'
# runs one dataset of the sweep.
BENCH_EXTRA += bench_rbm

.PHONY: table-rbm-sampling
table-rbm-sampling: $(STAMP) ## RBM sampling log-MMD/ESS table + one figure per dataset (DLP Fig. 4, ACS Fig. 4/6/9)
	$(SWEEP) experiment=dlp/fig4_rbm_sampling scale=$(SCALE) $(ARGS) && $(REPORT) table dlp/fig4_rbm_sampling --scale $(SCALE)

.PHONY: table-rbm-learning
table-rbm-learning: $(STAMP) ## RBM learning test-LL table by AIS, ACS Table 1 beside ours (Block Gibbs, GWG, DMALA, ACS)
	$(SWEEP) experiment=acs/table1_rbm_learning scale=$(SCALE) $(ARGS)
	$(SWEEP) experiment=acs/table1_rbm_learning_acs scale=$(SCALE) $(ARGS) && $(REPORT) table acs/table1_rbm_learning --scale $(SCALE)
