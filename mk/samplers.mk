# Sampler benchmarks: AB ESS tables (AB Tables 1-5, Fig. 1-3) and the ACS 2-D toy (ACS Fig. 1).
# Docs: docs/samplers.md.

# ---- AB ESS tables -------------------------------------------------------------------------
# target = label:experiment:overrides (overrides '+'-separated)
AB_ESS_TARGETS_PAPER = \
  grid_J0.3000:ab_ess:model.sigma=0.15 grid_J0.4407:ab_ess:model.sigma=0.22035 \
  grid_J0.7071:ab_ess:model.sigma=0.35355 \
  ba_J0.3000:ab_ess_ba:model.sigma=0.15 ba_J0.4407:ab_ess_ba:model.sigma=0.22035 \
  ba_J0.7071:ab_ess_ba:model.sigma=0.35355 \
  rotated_low:ab_ess_gaussian:model.structure=rotated+model.condition=low \
  rotated_medium:ab_ess_gaussian:model.structure=rotated+model.condition=medium \
  rotated_high:ab_ess_gaussian:model.structure=rotated+model.condition=high \
  sparse_low:ab_ess_gaussian:model.structure=sparse+model.condition=low \
  sparse_medium:ab_ess_gaussian:model.structure=sparse+model.condition=medium \
  sparse_high:ab_ess_gaussian:model.structure=sparse+model.condition=high \
  blr:ab_ess_blr: qmm:ab_ess_qmm:
AB_ESS_TARGETS_SMOKE = grid_J0.4407:ab_ess:model.sigma=0.22035 \
  rotated_medium:ab_ess_gaussian:model.structure=rotated+model.condition=medium blr:ab_ess_blr:
AB_ESS_TARGETS ?= $(if $(filter smoke,$(SCALE)),$(AB_ESS_TARGETS_SMOKE),$(AB_ESS_TARGETS_PAPER))
AB_ESS_PLAIN   ?= rwm,gibbs
AB_ESS_AB      ?= ab_1st,ab_shift,ab_max,ab_trace,dlp_trace
AB_ESS_SEEDS   ?= 0
# smoke: shorter Alg. 3 probes so (sigma, alpha) adaptation completes cycles in a short burn-in
AB_ESS_AB_ARGS ?= $(if $(filter smoke,$(SCALE)),sampler.n_probe=20)
AB_ESS_METRICS = ess_n ess_t accept_rate jump ess queries_per_step sigma alpha step_size radius
abx = outputs/multirun/$(call exp,ab_ess)

.PHONY: table-ab-ess
table-ab-ess: $(STAMP) ## AB ESS tables (AB Tables 1-5: ESS_n, ESS_t; RWM, Gibbs, LB, AB-*, DLP-trace) + (sigma, alpha) figures
	@mkdir -p $(TABLES)
	@for t in $(AB_ESS_TARGETS); do \
	  label=$${t%%:*}; rest=$${t#*:}; ex=$${rest%%:*}; ov=$${rest#*:}; ov=$${ov//+/ }; \
	  n=$(call exp,ab_ess)-$$label; e=$(call exp,$${ex}); \
	  echo "== AB ESS: $$label"; \
	  $(RUN) -m experiment=$$e name=$$n task.target=$$label $$ov progress=false seed=$(AB_ESS_SEEDS) \
	    sampler=$(AB_ESS_PLAIN) $(ARGS) || exit 1; \
	  $(RUN) -m experiment=$$e name=$$n task.target=$$label $$ov progress=false seed=$(AB_ESS_SEEDS) \
	    sampler=dmala task.tune_accept=0.574 $(ARGS) || exit 1; \
	  $(RUN) -m experiment=$$e name=$$n task.target=$$label $$ov progress=false seed=$(AB_ESS_SEEDS) \
	    sampler=$(AB_ESS_AB) $(AB_ESS_AB_ARGS) $(ARGS) || exit 1; \
	done
	$(MAKE) --no-print-directory _table-ab-ess figure-ab-ess-grid

ab_tab = $(if $(wildcard $(addprefix $(abx)-,$(2))),$(PY) scripts/make_table.py $(wildcard $(addprefix $(abx)-,$(2))) \
  --group task.target sampler --metrics $(AB_ESS_METRICS) --paper scripts/paper_values/ab_ess.yaml \
  --title "$(1) ($(SCALE) scale; LB = DMALA tuned to acceptance 0.574)" \
  --out $(TABLES)/$(call exp,ab_ess)_$(3),@echo "no runs for $(3)")

_table-ab-ess:
	$(call ab_tab,AB Table 1: ESS on selected quadratic targets,grid_J0.4407 ba_J0.4407 rotated_medium sparse_medium,table1)
	$(call ab_tab,AB Table 2: ESS on the 20x20 grid Ising,grid_J0.3000 grid_J0.4407 grid_J0.7071,table2)
	$(call ab_tab,AB Table 3: ESS on the 400-4 BA Ising,ba_J0.3000 ba_J0.4407 ba_J0.7071,table3)
	$(call ab_tab,AB Table 4: ESS on the 100-d rotated lattice Gaussian,rotated_low rotated_medium rotated_high,table4)
	$(call ab_tab,AB Table 5: ESS on the 100-d sparse lattice Gaussian,sparse_low sparse_medium sparse_high,table5)
	$(call ab_tab,AB Sec. 5.3: ESS on BLR and the quartic mixture (Fig. 2-3 left),blr qmm,nonquadratic)

# ---- (sigma, alpha) grids, AB Fig. 1-3: fixed (sigma, alpha), adapt off ------------------------
# Fig. 1: 100-d Bernoulli = 10x10 Ising with zero coupling and bias 0.5 (p = sigmoid(1); the
# paper does not give p), AB-1st. Fig. 2: BLR, AB-trace. Fig. 3: QMM, AB-trace.
AB_GRID_ALPHA_PAPER = 0.5,0.6,0.7,0.8,0.9,0.96
AB_GRID_ALPHA_SMOKE = 0.5,0.7,0.9
AB_GRID_ALPHA ?= $(if $(filter smoke,$(SCALE)),$(AB_GRID_ALPHA_SMOKE),$(AB_GRID_ALPHA_PAPER))
AB_GRID_FIGS_PAPER = \
  fig1_bernoulli:ab_ess:model.n_side=10+model.sigma=0.0+model.bias=0.5+sampler=ab_1st:0.1,0.5,1,2,4,16 \
  fig2_blr:ab_ess_blr:sampler=ab_trace:1,4,16,64 \
  fig3_qmm:ab_ess_qmm:sampler=ab_trace:10,100,415,1000
AB_GRID_FIGS_SMOKE = fig2_blr:ab_ess_blr:sampler=ab_trace:4,16
AB_GRID_FIGS ?= $(if $(filter smoke,$(SCALE)),$(AB_GRID_FIGS_SMOKE),$(AB_GRID_FIGS_PAPER))

.PHONY: figure-ab-ess-grid
figure-ab-ess-grid: $(STAMP) ## AB Fig. 1-3: ESS over fixed (sigma, alpha) grids
	@mkdir -p $(TABLES)
	@for f in $(AB_GRID_FIGS); do \
	  label=$${f%%:*}; r=$${f#*:}; ex=$${r%%:*}; r=$${r#*:}; ov=$${r%%:*}; sig=$${r#*:}; ov=$${ov//+/ }; \
	  n=$(call exp,ab_ess_grid)-$$label; \
	  $(RUN) -m experiment=$(call exp,$${ex}) name=$$n task.target=$$label $$ov progress=false \
	    sampler.adapt=false sampler.sigma=$$sig sampler.alpha=$(AB_GRID_ALPHA) $(ARGS) || exit 1; \
	  $(PY) -m ebmlab.tasks.sampler_ess grid outputs/multirun/$$n --metric ess_n \
	    --title "$$label: ESS_n over (sigma, alpha) ($(SCALE) scale)" \
	    --out $(TABLES)/$$n.png || exit 1; \
	done

# ---- ACS 2-D toy (ACS Fig. 1) ----------------------------------------------------------------
ACS_TOY_SAMPLERS ?= rw:rwm dmala:dmala ab:ab_1st acs:acs   # experiment suffix:sampler

.PHONY: figure-acs-toy
figure-acs-toy: $(STAMP) ## ACS Fig. 1: 2-D multimodal toy, ground truth vs RW, DMALA, AB, ACS (+ table)
	@mkdir -p $(TABLES)
	@for s in $(ACS_TOY_SAMPLERS); do \
	  $(RUN) -m experiment=acs_toy_$${s%%:*}$(if $(filter smoke,$(SCALE)),_smoke) progress=false \
	    sampler=$${s#*:} $(ARGS) || exit 1; \
	done
	$(PY) -m ebmlab.tasks.multimodal_2d figure outputs/multirun/$(call exp,acs_toy) \
	  --title "ACS Fig. 1 ($(SCALE) scale)" --out $(TABLES)/$(call exp,acs_toy).png
	$(PY) scripts/make_table.py outputs/multirun/$(call exp,acs_toy) --group sampler \
	  --metrics modes_visited mode_tv tv accept_rate jump seconds \
	  --title "ACS 2-D toy ($(SCALE) scale)" --out $(TABLES)/$(call exp,acs_toy)
BENCH_EXTRA += bench_ab
