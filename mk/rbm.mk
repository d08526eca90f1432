# RBM sampling (DLP Fig. 4; ACS Fig. 4, 6, 9) and RBM learning (ACS Table 1). Docs: docs/rbm.md.
BENCH_EXTRA += bench_rbm

RBM_SAMPLING_DATASETS ?= mnist_threshold emnist kmnist omniglot caltech
RBM_SAMPLING_SAMPLERS ?= block_gibbs,gibbs,gwg,dula,dmala
RBM_INITS             ?= random,mode
RBM_LEARNING_DATASETS ?= mnist_threshold emnist kmnist omniglot caltech $(if $(filter smoke,$(SCALE)),static_mnist)
RBM_LEARNING_SAMPLERS ?= block_gibbs,gwg,dmala
RBM_SEEDS             ?= 0

# exit 0 when dataset $(1)'s files for the given splits exist under $EBMLAB_DATA_DIR (default data/)
RBM_HAVE = $(PY) -c "import os, sys; from ebmlab.data.binary_images import BinaryImages as B; \
B(sys.argv[1], os.environ.get('EBMLAB_DATA_DIR', 'data')).check_files(sys.argv[2:])"
# smoke: the sampling RBM may be trained on the test split when train files are absent (declared)
RBM_SAMPLING_SPLITS = $(if $(filter smoke,$(SCALE)),test,train)
# per-dataset overrides: Omniglot thresholded for RBMs; ACS-PCD cycle 20 (Omniglot, Caltech)
# and alpha_max re-tuned every 10 cycles (Caltech) -- ACS App. D.4 / B.
rbm_bin = $(if $(filter omniglot,$(1)),dataset.binarize=threshold)
rbm_acs_pcd = $(if $(filter omniglot caltech,$(1)),sampler.pcd_cycle_length=20) \
  $(if $(filter caltech,$(1)),sampler.pcd_retune_max_every=10)

.PHONY: table-rbm-sampling
table-rbm-sampling: $(STAMP) ## RBM sampling log-MMD/ESS table + one figure per dataset (DLP Fig. 4, ACS Fig. 4/6/9)
	@mkdir -p $(TABLES)
	@for ds in $(RBM_SAMPLING_DATASETS); do \
	  if ! $(RBM_HAVE) $$ds $(RBM_SAMPLING_SPLITS) 2>/dev/null; then echo "rbm sampling: skipping $$ds (files not found)"; continue; fi; \
	  n=$(call exp,rbm_sampling)-$$ds; \
	  $(RUN) -m experiment=$(call exp,rbm_sampling) name=$$n dataset=$$ds $(call rbm_bin,$$ds) progress=false \
	    sampler=$(RBM_SAMPLING_SAMPLERS) task.init=$(RBM_INITS) seed=$(RBM_SEEDS) $(ARGS) || exit 1; \
	  $(RUN) -m experiment=$(call exp,rbm_sampling_acs) name=$$n dataset=$$ds $(call rbm_bin,$$ds) progress=false \
	    sampler=acs task.init=$(RBM_INITS) seed=$(RBM_SEEDS) $(ARGS) || exit 1; \
	  $(PY) -m ebmlab.tasks.rbm_sampling figure outputs/multirun/$$n \
	    --title "$$ds ($(SCALE) scale)" --out $(TABLES)/$$n.png || exit 1; \
	done
	$(MAKE) --no-print-directory _table-rbm-sampling

_table-rbm-sampling:
	$(PY) scripts/make_table.py $(wildcard outputs/multirun/$(call exp,rbm_sampling)-*) \
	  --group dataset sampler task.init \
	  --metrics log_mmd log_mmd_tail_mean log_mmd_floor ess ess_per_second accept_rate jump seconds_per_step \
	  --paper scripts/paper_values/rbm_sampling.yaml \
	  --title "RBM sampling, final log MMD^2 (natural log) and ESS ($(SCALE) scale$(if $(filter smoke,$(SCALE)),; RBMs trained on the test split where train files are absent -- see train_split in results.json))" \
	  --out $(TABLES)/$(call exp,rbm_sampling)

.PHONY: table-rbm-learning
table-rbm-learning: $(STAMP) ## RBM learning test-LL table by AIS, ACS Table 1 beside ours (Block Gibbs, GWG, DMALA, ACS)
	@mkdir -p $(TABLES)
	@for ds in $(RBM_LEARNING_DATASETS); do \
	  if ! $(RBM_HAVE) $$ds train test 2>/dev/null; then echo "rbm learning: skipping $$ds (train/test files not found)"; continue; fi; \
	  n=$(call exp,rbm_learning)-$$ds; \
	  $(RUN) -m experiment=$(call exp,rbm_learning) name=$$n dataset=$$ds $(call rbm_bin,$$ds) progress=false \
	    sampler=$(RBM_LEARNING_SAMPLERS) seed=$(RBM_SEEDS) $(ARGS) || exit 1; \
	  $(RUN) -m experiment=$(call exp,rbm_learning_acs) name=$$n dataset=$$ds $(call rbm_bin,$$ds) progress=false \
	    sampler=acs $(call rbm_acs_pcd,$$ds) seed=$(RBM_SEEDS) $(ARGS) || exit 1; \
	done
	$(MAKE) --no-print-directory _table-rbm-learning

_table-rbm-learning:
	$(PY) scripts/make_table.py $(wildcard outputs/multirun/$(call exp,rbm_learning)-*) \
	  --group dataset sampler --metrics test_ll log_z_stderr train_ll accept_rate time_per_iter ais_seconds \
	  --paper scripts/paper_values/rbm_learning.yaml \
	  --title "RBM learning, test log-likelihood by AIS (nats; $(SCALE) scale$(if $(filter smoke,$(SCALE)),; static_mnist stands in for thresholded MNIST))" \
	  --out $(TABLES)/$(call exp,rbm_learning)
