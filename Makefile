# The two commands of the README. Each creates (or reuses) .venv and installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Reinstall only when the distribution's definition changes.
INSTALLED := $(VENV)/.orinkit-installed
# Tests export real ONNX files with torch; this machine kind keeps the CPU build of 2.13.0 on disk, where a bare
# "torch" would fetch a CUDA build of several GB.
TORCH ?= torch==2.13.0

.PHONY: demo test

demo: $(INSTALLED)
	$(PY) examples/demo.py $(ARGS)

test: $(INSTALLED)
	$(PY) -m pytest $(ARGS)

$(PY):
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "orinkit needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade "pip>=23.1"
	$(PY) -m pip install --quiet '$(TORCH)'
	$(PY) -m pip install --quiet --editable '.[server,test,torch]'
	touch $@
