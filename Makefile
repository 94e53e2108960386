# Two commands on a fresh machine: `make demo` and `make test` (each installs first if needed).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# The CPU build of torch; a looser requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The quick profile's data, training and evaluation (flowbench run prints the time it takes), its
# record in runs/records (the committed ones in results/records stay as they are), then the
# tables with the quick profile's cells, yours marked "local".
demo: setup
	$(VENV)/bin/flowbench run flowcaps
	$(VENV)/bin/flowbench table --profile quick

test: setup
	$(PY) -m pytest

clean:
	rm -rf $(VENV)
