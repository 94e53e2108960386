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

demo: setup
	@echo "make demo: makes Geo at 64 px (about 1-2 min), trains FlowCapsules' quick profile (23 min),"
	@echo "evaluates on 10k test pairs (about 5 min), then prints the tables: about 30 minutes on 2 CPU cores."
	$(VENV)/bin/flowbench run flowcaps
	$(VENV)/bin/flowbench table

test: setup
	$(PY) -m pytest

clean:
	rm -rf $(VENV)
