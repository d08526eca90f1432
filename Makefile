# ebmlab: `make help` lists the targets. Everything runs inside .venv (created on demand).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
# the venv's python once made, else the system's (targets that may run before `make install`)
PY_VENV_OR_SYSTEM = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
STAMP  := $(VENV)/.installed
SCALE  ?= paper
RUN    := $(PY) -m ebmlab.run
# A table target runs an experiment's whole sweep (conf/experiment/<paper>/<name>.yaml holds
# every setting) at $(SCALE), then builds its tables and figures into
# outputs/tables/<paper>/<name>/<scale>/ (python -m ebmlab.report).
SWEEP  := $(RUN) -m progress=false
REPORT := $(PY) -m ebmlab.report
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
	$(RUN) experiment=dlp/fig5_ising_learning scale=smoke $(ARGS)

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
	$(PY) -m benchmarks.bench_samplers --name samplers
	$(PY) -m benchmarks.bench_ising_learning
	$(PY) -m benchmarks.bench_sdp | tee outputs/bench/sdp.md
	@for b in $(BENCH_EXTRA); do $(PY) -m benchmarks.$$b | tee outputs/bench/$$b.md || exit 1; done

.PHONY: gpu-check
GPU_PY ?= $(PY_VENV_OR_SYSTEM)
gpu-check: ## on a machine with one GPU (< 8 min): tests, kill/resume per task, GPU<->CPU resume, benchmarks -> docs/gpu/<date>-<gpu>.md (ARGS=--cpu: a dry run here)
	$(GPU_PY) scripts/gpu_check.py $(ARGS)

.PHONY: table-ising-learning
table-ising-learning: $(STAMP) ## Ising learning log-RMSE table + figures (DLP Fig. 5; RMwGGIS Table 3 rows when run)
	$(SWEEP) experiment=dlp/fig5_ising_learning scale=$(SCALE) $(ARGS) && $(REPORT) table dlp/fig5_ising_learning --scale $(SCALE)

.PHONY: table-ising-sampling
table-ising-sampling: $(STAMP) ## Ising sampling RMSE / ESS table + figures (DLP Fig. 3)
	$(SWEEP) experiment=dlp/fig3_ising_sampling scale=$(SCALE) $(ARGS) && $(REPORT) table dlp/fig3_ising_sampling --scale $(SCALE)

CLAIMS ?= all
.PHONY: reproduce
reproduce: $(STAMP) ## run the runs the papers' claims lack (finished or recorded ones are skipped, unfinished ones resume), then judge: CLAIMS=dlp|acs|ab|rmwggis|grbm|all (DRY_RUN=1: print the sweeps)
	$(REPORT) reproduce $(CLAIMS) --scale $(SCALE) --run $(if $(ARGS),--args $(ARGS)) $(if $(DRY_RUN),--dry-run)

.PHONY: reproduction-report
reproduction-report: $(STAMP) ## rewrite outputs/reproduction/*.md from the finished runs (copied to records/ first; runs none); INTO=docs/reproduction.md (with CLAIMS=all) also writes the docs index and pages from the records alone
	$(REPORT) reproduce $(CLAIMS) --scale $(SCALE) $(if $(INTO),--into $(INTO))

.PHONY: clean
clean: ## remove run outputs, caches and the venv
	rm -rf outputs/runs outputs/multirun outputs/tables outputs/bench .cache .pytest_cache .ruff_cache $(VENV)

# Benchmarks and tables of the other papers live in mk/*.mk.
-include mk/*.mk
