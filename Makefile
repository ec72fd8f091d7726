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
CHROMIUM ?= /usr/bin/chromium
# GStreamer for the video tests: gst-rtsp-server serves the test camera, csi:// and gst:// sources run on it. The
# marker is gstreamer1.0-libav's plugin (the software H.264 decoder): the one package of the set a desktop Debian
# with GStreamer usually lacks.
GSTREAMER ?= /usr/lib/$(shell uname -m)-linux-gnu/gstreamer-1.0/libgstlibav.so
GSTREAMER_PACKAGES := python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good \
	gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export ORINKIT_CHROMIUM := $(CHROMIUM)

.PHONY: demo test lint docs

demo: $(INSTALLED)
	$(PY) -m orinkit.lanes.demo $(ARGS)

test: $(INSTALLED) $(CHROMIUM) $(GSTREAMER)
	$(PY) -m pytest $(ARGS)

# The device page's browser tests drive Debian's chromium (about a minute and 500 MB on a fresh machine; as root,
# or with sudo). Playwright's own browser download cannot be reached here and is never used.
$(CHROMIUM):
	command -v apt-get >/dev/null || { echo "install Chromium at $(CHROMIUM) (or set CHROMIUM=...)"; exit 1; }
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium

# The video tests' RTSP camera and GStreamer sources (as root, or with sudo). The camera runs under the system
# Python: python3-gi has no PyPI wheel.
$(GSTREAMER):
	command -v apt-get >/dev/null || { echo "install GStreamer: $(GSTREAMER_PACKAGES) (or set GSTREAMER=...)"; exit 1; }
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(GSTREAMER_PACKAGES)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .

# The documentation site, into site/: --strict turns every warning (a broken link or anchor, an API name that no
# longer exists) into a failure. The reference pages are generated from the code at build time (docs/hooks/).
# NO_MKDOCS_2_WARNING silences Material's banner about its own future, which says nothing about the site.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

$(PY):
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "orinkit needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade "pip>=23.1"
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet --editable '.[server,convert,test,torch,fleet,video,int8,tune,docs]'
	touch $@
