# The two commands of the README. Each creates (or reuses) .venv and installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Reinstall only when the distribution's definition changes.
INSTALLED := $(VENV)/.orinkit-installed
# Tests export real ONNX files with torch and torchvision's ResNets. This machine kind keeps these two releases on
# disk (a matching pair: PyPI's torchvision does not import beside other torch builds); pinning them avoids
# downloading several GB.
TORCH ?= torch==2.14.1 torchvision==0.29.1

.PHONY: demo test lint

demo: $(INSTALLED)
	$(PY) -m orinkit.lanes.demo $(ARGS)

test: $(INSTALLED)
	$(PY) -m pytest $(ARGS)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .

$(PY):
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "orinkit needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade "pip>=23.1"
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet --editable '.[server,test,torch]'
	touch $@
