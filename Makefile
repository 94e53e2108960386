# Two commands on a fresh machine: `make demo` and `make test` (each installs first if needed).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# The CPU build of torch; a looser requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/geogen make --variant geo --n 2000 --size 64 --out data/demo-geo --resume
	$(VENV)/bin/geogen show data/demo-geo --split test --index 0-7 -o data/demo-geo/sheet.png

test: setup
	$(PY) -m pytest

clean:
	rm -rf $(VENV) data/demo-geo
