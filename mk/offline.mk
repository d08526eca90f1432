# Installs on a machine with no internet (docs/cluster.md; scripts/offline.py): make the
# wheelhouse where PyPI is reachable, copy the folder over, install from it there. The
# install keeps a torch already on the machine (a CUDA build) when it meets pyproject's range.
PYVER    ?= $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PLATFORM ?= manylinux_2_28_x86_64
WHEELS   ?= .whl
EXTRAS   ?= dev
TORCH    ?= pinned

.PHONY: wheelhouse
wheelhouse: ## every wheel an offline install needs, into WHEELS (PYVER=3.11 PLATFORM=manylinux_2_28_x86_64 EXTRAS=dev TORCH=pinned|none)
	$(PY_VENV_OR_SYSTEM) scripts/offline.py wheelhouse --dest $(WHEELS) --python-version $(PYVER) \
	  --platform $(PLATFORM) --extras "$(EXTRAS)" --torch $(TORCH)

.PHONY: install-offline
install-offline: ## install ebmlab from WHEELS=<dir> with no network (keeps an installed torch that fits; makes .venv with --system-site-packages)
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) scripts/offline.py install --wheels $(WHEELS) --extras "$(EXTRAS)"
	@touch $(STAMP)
