# Ratio matching (RMwGGIS): synthetic density modelling (Table 1, 4; Fig. 1, 2, 4), time and
# memory (Table 5), RM / RMwGGIS on Ising learning (Table 3). Docs: docs/ratio_matching.md.
BENCH_EXTRA += bench_ratio_matching

# SCALE=smoke: three datasets, 300 iterations, 1,000 vs 1,000 MMD samples (declared in the docs)
RMWGGIS_DATASETS ?= $(if $(filter smoke,$(SCALE)),2spirals 8gaussians checkerboard,2spirals 8gaussians circles moons pinwheel swissroll checkerboard)
RMWGGIS_SEEDS    ?= 0
# the reference trains checkerboard with lr 1e-4 (others 5e-4); smoke runs use 1e-3 / 2e-4
RMWGGIS_LR_CHECKERBOARD = $(if $(filter smoke,$(SCALE)),2e-4,1e-4)
RMWGGIS_SYN      = $(call exp,rmwggis_synthetic)
RMWGGIS_256      = $(call exp,rmwggis_synthetic_256)
# optional PCD comparison on the same data, e.g. RMWGGIS_PCD_SAMPLERS=gwg,dmala
RMWGGIS_PCD_SAMPLERS ?=
ISING_LEARNING_RM_LEARNERS ?= rm,rmwggis
ISING_LEARNING_EXTRA_DIRS += outputs/multirun/$(call exp,ising_learning_rm)

rm_comma := ,
rm_empty :=
rm_space := $(rm_empty) $(rm_empty)
rm_csv = $(subst $(rm_space),$(rm_comma),$(strip $(1)))
RMWGGIS_DS_MAIN  = $(call rm_csv,$(filter-out checkerboard,$(RMWGGIS_DATASETS)))
RMWGGIS_DS_CHECK = $(filter checkerboard,$(RMWGGIS_DATASETS))

# $(1): extra overrides (dataset list, lr) for RM, RMwGGIS basic and RMwGGIS advanced
define rmwggis_runs
	$(RUN) -m experiment=$(RMWGGIS_SYN) progress=false seed=$(RMWGGIS_SEEDS) learner=rm $(1) $(ARGS)
	$(RUN) -m experiment=$(RMWGGIS_SYN) progress=false seed=$(RMWGGIS_SEEDS) learner=rmwggis \
	  learner.variant=basic,advanced $(1) $(ARGS)
endef

.PHONY: table-rmwggis-synthetic
table-rmwggis-synthetic: $(STAMP) ## synthetic density MMD (Table 1, paper beside ours), RM objective (Table 4), heat maps (Fig. 1)
	$(if $(RMWGGIS_DS_MAIN),$(call rmwggis_runs,dataset.name=$(RMWGGIS_DS_MAIN)))
	$(if $(RMWGGIS_DS_CHECK),$(call rmwggis_runs,dataset.name=checkerboard learner.lr=$(RMWGGIS_LR_CHECKERBOARD)))
	$(if $(RMWGGIS_PCD_SAMPLERS),$(RUN) -m experiment=$(call exp,rmwggis_synthetic_pcd) progress=false \
	  seed=$(RMWGGIS_SEEDS) dataset.name=$(call rm_csv,$(RMWGGIS_DATASETS)) sampler=$(RMWGGIS_PCD_SAMPLERS) $(ARGS))
	$(MAKE) --no-print-directory _table-rmwggis-synthetic

_table-rmwggis-synthetic:
	$(PY) scripts/make_table.py outputs/multirun/$(RMWGGIS_SYN) --group dataset.name learner learner.variant \
	  --metrics mmd time_per_iter --paper scripts/paper_values/rmwggis_synthetic.yaml \
	  --title "Synthetic density modelling, MMD (linear kernel, unbiased; d = 32; $(SCALE) scale$(if $(filter smoke,$(SCALE)),: 300 iterations and 1000 vs 1000 samples - not comparable to the paper,))" \
	  --out $(TABLES)/$(RMWGGIS_SYN)
	$(PY) scripts/make_table.py outputs/multirun/$(RMWGGIS_SYN) --group dataset.name learner learner.variant \
	  --metrics rm_objective final_loss \
	  --title "Synthetic density modelling, full RM objective Eq. (3) on fresh data (RMwGGIS Table 4; $(SCALE) scale)" \
	  --out $(TABLES)/$(RMWGGIS_SYN)_objective
	$(PY) -m ebmlab.tasks.density_modeling figure outputs/multirun/$(RMWGGIS_SYN) \
	  --rows dataset.name --cols learner learner.variant \
	  --title "Learned densities exp(-E), d = 32 ($(SCALE) scale)" --out $(TABLES)/$(RMWGGIS_SYN)_heatmaps.png
	@if [ -d outputs/multirun/$(call exp,rmwggis_synthetic_pcd) ]; then \
	  $(PY) scripts/make_table.py outputs/multirun/$(call exp,rmwggis_synthetic_pcd) --group dataset.name sampler \
	    --metrics mmd rm_objective accept_rate time_per_iter \
	    --title "Synthetic density modelling with PCD ($(SCALE) scale)" \
	    --out $(TABLES)/$(call exp,rmwggis_synthetic_pcd); fi

.PHONY: fig-rmwggis-scaling
fig-rmwggis-scaling: $(STAMP) ## 256-bit 2spirals heat maps over training, RM / RMwGGIS / RMwRAND (Fig. 4) and s = 5..100 (Fig. 2)
	$(RUN) -m experiment=$(RMWGGIS_256) progress=false learner=rm,rmwggis,rmwrand $(ARGS)
	$(RUN) -m experiment=$(RMWGGIS_256) name=$(RMWGGIS_256)_s progress=false learner=rmwggis,rmwrand \
	  learner.s=5,10,50,100 $(ARGS)
	$(PY) -m ebmlab.tasks.density_modeling figure outputs/multirun/$(RMWGGIS_256) --snapshots \
	  --rows learner --cols dataset.name \
	  --title "2spirals, d = 256, over training iterations ($(SCALE) scale)" --out $(TABLES)/$(RMWGGIS_256)_over_training.png
	$(PY) -m ebmlab.tasks.density_modeling figure outputs/multirun/$(RMWGGIS_256)_s \
	  --rows learner --cols learner.s \
	  --title "2spirals, d = 256, RMwGGIS vs RMwRAND over s ($(SCALE) scale)" --out $(TABLES)/$(RMWGGIS_256)_s.png

.PHONY: bench-ratio-matching
bench-ratio-matching: $(STAMP) ## time + peak memory per batch, RM vs RMwGGIS on 2spirals, d = 32..2048 (Table 5)
	@mkdir -p outputs/bench
	$(PY) -m benchmarks.bench_ratio_matching $(if $(filter smoke,$(SCALE)),--dims 32$(rm_comma)64$(rm_comma)128$(rm_comma)256 --repeats 3) \
	  $(ARGS) | tee outputs/bench/$(call exp,ratio_matching).md

.PHONY: table-ising-learning-rm
table-ising-learning-rm: $(STAMP) ## RM and RMwGGIS on Ising learning, added to the Ising learning table (RMwGGIS Table 3)
	$(RUN) -m experiment=$(call exp,ising_learning_rm) progress=false learner=$(ISING_LEARNING_RM_LEARNERS) $(ARGS)
	$(MAKE) --no-print-directory _table-ising-learning
