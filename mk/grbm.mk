# GRBM (Liao et al. 2022): GMM densities (Fig. 1) and the MNIST FID table (Tables 1-3). Each
# figure column / table row is an option of conf/grbm_gmm_setting/ or conf/grbm_mnist_row/;
# ARGS='grbm_mnist_row=gibbs,gl_wo_adjust' runs a subset.
BENCH_EXTRA += bench_grbm

.PHONY: figure-grbm-gmm
figure-grbm-gmm: $(STAMP) ## GRBM GMM densities/samples, 5 samplers x iso/aniso (GRBM Fig. 1) + KL table
	$(SWEEP) experiment=grbm/fig1_gmm scale=$(SCALE) $(ARGS) && $(REPORT) table grbm/fig1_gmm --scale $(SCALE)

.PHONY: table-grbm-fid
table-grbm-fid: $(STAMP) ## GRBM MNIST FID: Table 1 + ablations of Tables 2-3, paper values beside ours
	$(SWEEP) experiment=grbm/table1_mnist_fid scale=$(SCALE) $(ARGS) && $(REPORT) table grbm/table1_mnist_fid --scale $(SCALE)
