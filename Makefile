# ebmlab: `make help` lists the targets. Everything runs inside .venv (created on demand).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SCALE  ?= paper
RUN    := $(PY) -m ebmlab.run
TABLES := outputs/tables
# paper scale -> experiment=<name>; SCALE=smoke -> experiment=<name>_smoke
exp     = $(if $(filter smoke,$(SCALE)),$(1)_smoke,$(1))
export OMP_NUM_THREADS ?= 2

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sort | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-26s\033[0m %s\n", $$1, $$2}'
	@echo "  Variables: SCALE=paper|smoke (default paper), ARGS='extra hydra overrides'"

.PHONY: install
install: $(STAMP) ## create .venv and install ebmlab with dev tools (idempotent)

.PHONY: run
run: $(STAMP) ## the main job: Ising learning at CPU (smoke) scale, no download
	$(RUN) experiment=ising_learning_smoke $(ARGS)

.PHONY: lint
lint: $(STAMP) ## ruff check + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

.PHONY: format
format: $(STAMP) ## apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

.PHONY: test
TEST_WORKERS ?= 2
test: lint ## fast test suite (what CI runs); TEST_WORKERS=0 runs in one process
	$(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS)) $(ARGS)

.PHONY: test-all
test-all: lint ## every test, including the slow ones
	$(PY) -m pytest -q -m "" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS)) $(ARGS)

.PHONY: bench
bench: $(STAMP) ## throughput benchmarks (not run by CI); results in outputs/bench/
	@mkdir -p outputs/bench
	$(PY) -m benchmarks.bench_samplers | tee outputs/bench/samplers.md
	$(PY) -m benchmarks.bench_sdp | tee outputs/bench/sdp.md
	@for b in $(BENCH_EXTRA); do $(PY) -m benchmarks.$$b | tee outputs/bench/$$b.md || exit 1; done

ISING_LEARNING_SAMPLERS ?= gibbs,gwg,dula,dmala
comma := ,
ISING_LEARNING_STEPS = $(if $(filter smoke,$(SCALE)),5$(comma)10,5$(comma)10$(comma)25$(comma)50$(comma)100)

.PHONY: table-ising-learning
table-ising-learning: $(STAMP) ## Ising learning log-RMSE table + figures (DLP Fig. 5 / RMwGGIS Table 3)
	$(RUN) -m experiment=$(call exp,ising_learning) progress=false \
	  sampler=$(ISING_LEARNING_SAMPLERS) learner.sampler_steps=$(ISING_LEARNING_STEPS) $(ARGS)
	$(MAKE) --no-print-directory _table-ising-learning

_table-ising-learning:
	$(PY) scripts/make_table.py outputs/multirun/$(call exp,ising_learning) $(ISING_LEARNING_EXTRA_DIRS) \
	  --group learner sampler learner.sampler_steps --metrics log_rmse rmse time_per_iter seconds \
	  --curve log_rmse --title "Ising learning ($(SCALE) scale)" --out $(TABLES)/$(call exp,ising_learning)

.PHONY: table-ising-sampling
table-ising-sampling: $(STAMP) ## Ising sampling RMSE / ESS table + figures (DLP Fig. 3)
	$(RUN) -m experiment=$(call exp,ising_sampling) progress=false sampler=gibbs,gwg $(ARGS)
	$(RUN) -m experiment=$(call exp,ising_sampling) progress=false sampler=dmala sampler.step_size=0.4 $(ARGS)
	$(RUN) -m experiment=$(call exp,ising_sampling) progress=false sampler=dula sampler.step_size=0.2 $(ARGS)
	$(PY) scripts/make_table.py outputs/multirun/$(call exp,ising_sampling) \
	  --group sampler --metrics log_rmse ess_per_step ess_per_second accept_rate jump \
	  --curve log_rmse --title "Ising sampling ($(SCALE) scale)" --out $(TABLES)/$(call exp,ising_sampling)

.PHONY: clean
clean: ## remove run outputs, caches and the venv
	rm -rf outputs/runs outputs/multirun outputs/tables outputs/bench .cache .pytest_cache .ruff_cache $(VENV)

# Benchmarks and tables of the other papers live in mk/*.mk.
-include mk/*.mk
