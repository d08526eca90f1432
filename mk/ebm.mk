# Deep EBMs on binary images (DLP Table 1, ACS Table 2; mixing: ACS Fig. 5, AB Fig. 4).
# Paper scale is a GPU job (50,000 iterations of a resnet-64 per run); SCALE=smoke trains a
# narrow ResNet for 200 iterations on CPU and the table header says so.
EBM_DATASETS ?= $(if $(filter smoke,$(SCALE)),static_mnist caltech,static_mnist dynamic_mnist omniglot caltech)
EBM_SEEDS ?= 0
EBM_LEARN_DIR = outputs/multirun/$(call exp,ebm_learning)
# per-dataset extras (shell variables in the loop): Caltech uses a 1,000-state buffer; ACS on
# Caltech uses 30 steps (paper scale), rho* 0.7, re-tuning every 10 cycles (ACS App. D.5)
EBM_CALTECH = learner.buffer_size=1000
EBM_CALTECH_ACS = $(EBM_CALTECH) $(if $(filter smoke,$(SCALE)),,learner.sampler_steps=30) \
  sampler.target_accept=0.7 sampler.pcd_retune_max_every=10 sampler.pcd_retune_min_every=10

.PHONY: table-ebm-learning
table-ebm-learning: $(STAMP) ## deep-EBM test LL by AIS, GWG / DULA / DMALA / ACS, papers' values beside ours (DLP Table 1, ACS Table 2)
	@for d in $(EBM_DATASETS); do \
	  x=""; xa=""; if [ "$$d" = caltech ]; then x="$(EBM_CALTECH)"; xa="$(EBM_CALTECH_ACS)"; fi; \
	  $(RUN) -m experiment=$(call exp,ebm_learning) progress=false dataset=$$d seed=$(EBM_SEEDS) \
	    sampler=gwg $$x $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  $(RUN) -m experiment=$(call exp,ebm_learning) progress=false dataset=$$d seed=$(EBM_SEEDS) \
	    sampler=dula sampler.step_size=0.1 $$x $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  $(RUN) -m experiment=$(call exp,ebm_learning) progress=false dataset=$$d seed=$(EBM_SEEDS) \
	    sampler=dmala sampler.step_size=0.15 $$x $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  $(RUN) -m experiment=$(call exp,ebm_learning_acs) progress=false dataset=$$d seed=$(EBM_SEEDS) \
	    sampler=acs $$xa $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	done
	$(MAKE) --no-print-directory _table-ebm-learning

_table-ebm-learning:
	$(PY) scripts/make_table.py $(EBM_LEARN_DIR) --group sampler dataset \
	  --metrics test_ll best_valid_ll best_step diverged_at accept_rate time_per_iter n_params \
	  --paper scripts/paper_values/ebm_learning.yaml --curve valid_ll --x step \
	  --title "Deep-EBM learning, test log-likelihood in nats by AIS ($(SCALE) scale$(if $(filter smoke,$(SCALE)),: narrow ResNet and few iterations; not comparable to the papers,))" \
	  --out $(TABLES)/$(call exp,ebm_learning)

# Mixing uses the GWG-trained model of each dataset (as ACS App. D.3). AB diagonal variant:
# alpha 0.6 (MNIST) / 0.55 (Omniglot, Caltech) as chosen in the AB paper, and a grid over sigma
# (EBM_AB_SIGMAS; the paper's grid and chosen sigma are not reported). EBM_MIXING_AB= skips AB.
EBM_MIXING_AB ?= sampler=ab_diag
EBM_AB_SIGMAS ?= 0.1,0.2,0.5
.PHONY: figure-ebm-mixing
figure-ebm-mixing: $(STAMP) ## deep-EBM mixing curves (mean log p~ vs steps and seconds) from table-ebm-learning's GWG checkpoints (ACS Fig. 5, AB Fig. 4)
	@for d in $(EBM_DATASETS); do \
	  ck=$$(ls -d $(EBM_LEARN_DIR)/*dataset=$$d*sampler=gwg* 2>/dev/null | head -n 1); \
	  if [ -z "$$ck" ]; then echo "no GWG-trained $$d model under $(EBM_LEARN_DIR): run make table-ebm-learning first"; exit 1; fi; \
	  n=$(call exp,ebm_mixing)_$$d; ab_alpha=0.6; \
	  if [ "$$d" = omniglot ] || [ "$$d" = caltech ]; then ab_alpha=0.55; fi; \
	  $(RUN) -m experiment=$(call exp,ebm_mixing) name=$$n progress=false dataset=$$d "task.checkpoint='$$ck'" \
	    sampler=gwg $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  $(RUN) -m experiment=$(call exp,ebm_mixing) name=$$n progress=false dataset=$$d "task.checkpoint='$$ck'" \
	    sampler=dmala sampler.step_size=0.2 $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  $(RUN) -m experiment=$(call exp,ebm_mixing_acs) name=$$n progress=false dataset=$$d "task.checkpoint='$$ck'" \
	    sampler=acs $(ARGS) || echo "ebm: a run failed or diverged (see above); continuing"; \
	  if [ -n "$(EBM_MIXING_AB)" ]; then \
	    $(RUN) -m experiment=$(call exp,ebm_mixing) name=$$n progress=false dataset=$$d "task.checkpoint='$$ck'" \
	      $(EBM_MIXING_AB) sampler.alpha=$$ab_alpha sampler.sigma=$(EBM_AB_SIGMAS) $(ARGS) || exit 1; fi; \
	  $(PY) scripts/make_table.py outputs/multirun/$$n --group sampler sampler.sigma \
	    --metrics final_mean_log_prob accept_rate steps_per_second tune_seconds \
	    --curve mean_log_prob --x step seconds \
	    --title "Deep-EBM mixing, $$d ($(SCALE) scale)" --out $(TABLES)/$$n || exit 1; \
	done
BENCH_EXTRA += bench_resnet_ebm
