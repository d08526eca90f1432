# Deep EBMs on binary images (DLP Table 1, ACS Table 2; mixing: ACS Fig. 5, AB Fig. 4).
# Paper scale is a GPU job (50,000 iterations of a resnet-64 per run); SCALE=smoke trains a
# narrow ResNet for 200 iterations on CPU and the table header says so. A run that diverges
# before its first validation has no result; the table is built from the others.
.PHONY: table-ebm-learning
table-ebm-learning: $(STAMP) ## deep-EBM test LL by AIS, GWG / DULA / DMALA / ACS, papers' values beside ours (DLP Table 1, ACS Table 2)
	$(SWEEP) experiment=dlp/table1_ebm_learning scale=$(SCALE) $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; $(REPORT) table dlp/table1_ebm_learning --scale $(SCALE)

# Mixing samples from the GWG-trained model of each dataset (ACS App. D.3), found in the sweep
# of table-ebm-learning (report.inputs of the mixing experiments).
.PHONY: figure-ebm-mixing
figure-ebm-mixing: $(STAMP) ## deep-EBM mixing curves (mean log p~ vs steps and seconds) from table-ebm-learning's GWG models (ACS Fig. 5, AB Fig. 4)
	m=$$($(REPORT) inputs acs/fig5_ebm_mixing --scale $(SCALE)) && $(SWEEP) experiment=acs/fig5_ebm_mixing scale=$(SCALE) "$$m" $(ARGS)
	m=$$($(REPORT) inputs ab/fig4_ebm_mixing --scale $(SCALE)) && $(SWEEP) experiment=ab/fig4_ebm_mixing scale=$(SCALE) "$$m" $(ARGS) && $(REPORT) table acs/fig5_ebm_mixing --scale $(SCALE)
BENCH_EXTRA += bench_resnet_ebm
