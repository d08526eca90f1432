# GRBM (Liao et al. 2022): GMM densities (Fig. 1) and the MNIST FID table (Tables 1-3).
# Every run gets a task.label (the table row / figure column); rows are label:experiment:overrides
# (overrides comma-separated, "-" = none). SCALE=smoke runs the same rows at CPU sizes; the
# hidden sizes of Table 2 are then divided by 32 (2048/4096/8192 -> 64/128/256).
GRBM_SEEDS ?= 1234
GRBM_ONLY ?=
grbm_smoke = $(filter smoke,$(SCALE))
GRBM_H_S = $(if $(grbm_smoke),64,2048)
GRBM_H_M = $(if $(grbm_smoke),128,4096)
GRBM_H_L = $(if $(grbm_smoke),256,8192)

GRBM_GMM_ROWS = \
  gibbs:grbm_gmm_gibbs:- \
  langevin_wo_adjust:grbm_gmm:sampler=grbm_langevin,sampler.adjust_step=100 \
  langevin_w_adjust:grbm_gmm:sampler=grbm_langevin,sampler.adjust_step=0 \
  gibbs_langevin_wo_adjust:grbm_gmm:sampler.adjust_step=100 \
  gibbs_langevin_w_adjust:grbm_gmm:sampler.adjust_step=0

# alpha_0 20 / 10 / 5 of the paper (energy_scale=batch at batch 512) = 0.0390625 / 0.01953125 /
# 0.009765625 here (energy_scale=none); "wo. adjust" = adjust_step 100 (>= CD steps).
GRBM_FID_ROWS = \
  gibbs:grbm_mnist_gibbs:- \
  langevin_wo_adjust:grbm_mnist:sampler=grbm_langevin,sampler.adjust_step=100 \
  langevin_w_adjust:grbm_mnist:sampler=grbm_langevin,sampler.adjust_step=0 \
  gl_wo_adjust:grbm_mnist:- \
  gl_w_adjust:grbm_mnist:sampler.adjust_step=50,task.anneal_step_size=true \
  gl_wo_adjust_cd50_h2048:grbm_mnist:learner.cd_steps=50,model.n_hidden=$(GRBM_H_S) \
  gl_wo_adjust_cd50_h4096:grbm_mnist:learner.cd_steps=50,model.n_hidden=$(GRBM_H_M) \
  gl_wo_adjust_cd50_h8192:grbm_mnist:learner.cd_steps=50,model.n_hidden=$(GRBM_H_L) \
  gl_wo_adjust_k1:grbm_mnist:sampler.n_inner=1 \
  gl_wo_adjust_k5:grbm_mnist:sampler.n_inner=5 \
  gl_wo_adjust_a10:grbm_mnist:sampler.step_size=0.01953125 \
  gl_wo_adjust_a5:grbm_mnist:sampler.step_size=0.009765625 \
  gl_w_adjust_eta0:grbm_mnist:sampler.adjust_step=0 \
  gl_w_adjust_eta25:grbm_mnist:sampler.adjust_step=25 \
  gl_w_adjust_eta50:grbm_mnist:sampler.adjust_step=50

# $(1): rows, $(2): extra overrides for every row. GRBM_ONLY="gibbs gl_wo_adjust" runs a subset.
define grbm_rows
	@set -e; for row in $(1); do \
	  label=$${row%%:*}; rest=$${row#*:}; exp=$${rest%%:*}; ov=$${rest#*:}; \
	  if [ -n "$(GRBM_ONLY)" ] && ! echo " $(GRBM_ONLY) " | grep -q " $$label "; then continue; fi; \
	  [ "$$ov" = "-" ] && ov=""; \
	  echo ">>> $$label: experiment=$(if $(grbm_smoke),$${exp}_smoke,$$exp) $${ov//,/ }"; \
	  $(RUN) -m experiment=$(if $(grbm_smoke),$${exp}_smoke,$$exp) progress=false \
	    task.label=$$label seed=$(GRBM_SEEDS) $${ov//,/ } $(2) $(ARGS); \
	done
endef

.PHONY: figure-grbm-gmm table-grbm-fid _figure-grbm-gmm _table-grbm-fid
figure-grbm-gmm: $(STAMP) ## GRBM GMM densities/samples, 5 samplers x iso/aniso (GRBM Fig. 1) + KL table
	$(call grbm_rows,$(GRBM_GMM_ROWS),dataset=gmm_iso$(comma)gmm_aniso)
	$(MAKE) --no-print-directory _figure-grbm-gmm

comma := ,
_figure-grbm-gmm:
	@mkdir -p $(TABLES)
	$(PY) -m ebmlab.tasks.grbm_gmm figure outputs/multirun/$(call exp,grbm_gmm) \
	  --out $(TABLES)/$(call exp,grbm_gmm)_fig1.png
	$(PY) scripts/make_table.py outputs/multirun/$(call exp,grbm_gmm) --group task.label dataset \
	  --metrics kl test_nll sample_in_mode sample_modes_covered sample_mode_tv accept_rate seconds \
	  --title "GRBM on the 2-D GMM ($(SCALE) scale; KL(true||model) on a grid, lower is better)" \
	  --out $(TABLES)/$(call exp,grbm_gmm)

table-grbm-fid: $(STAMP) ## GRBM MNIST FID: Table 1 + ablations of Tables 2-3, paper values beside ours
	$(call grbm_rows,$(GRBM_FID_ROWS),)
	$(MAKE) --no-print-directory _table-grbm-fid

_table-grbm-fid:
	$(PY) scripts/make_table.py outputs/multirun/$(call exp,grbm_mnist) --group task.label \
	  --metrics fid_inception fid_mnist_features fid_mnist_features_data feature_net_accuracy \
	    final_log_var accept_rate seconds \
	  --paper scripts/paper_values/grbm_fid.yaml \
	  --title "GRBM on MNIST ($(SCALE) scale$(if $(grbm_smoke),: H/32$(comma) batch 50$(comma) 2 epochs on test[:2000]$(comma) 500 samples vs test[5000:]$(comma) classifier on test[:5000],: 10$(comma)000 samples vs test)). fid_mnist_features is NOT Inception FID; paper column = Inception FID" \
	  --out $(TABLES)/$(call exp,grbm_mnist)
