# make run: create .venv, install, serve on http://127.0.0.1:8000
# make test: install the test extras (and Debian's chromium and spin where missing), run every test
# make dist: build the sdist and the wheel into dist/ (the wheel carries static/, templates/, traces/)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint bench load fuzz capture chromium spin install install-test dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test chromium spin

run: install
	$(BIN)/mbarrier-inspector serve --host $(HOST) --port $(PORT)

# Debian's Chromium drives the browser tests (Playwright's own browser download does not work here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >/dev/null \
	  || { echo "could not install chromium"; exit 1; }; }

# Debian's SPIN (and gcc, which builds pan) check the exported Promela models
# (tests/check/test_promela.py, bench/check.py).
spin:
	@{ command -v spin >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1; } || { \
	  echo "installing Debian's spin and gcc for the Promela tests"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q spin gcc) >/dev/null \
	  || { echo "could not install spin"; exit 1; }; }

lint: install-test
	$(BIN)/ruff check .

test: install-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The sdist, then the wheel built from it (as `pip install` of the sdist would); see README.
dist: $(VENV)/.installed-test
	rm -rf build dist
	$(BIN)/python -m build --outdir dist .

bench: install-test
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/check.py
	$(BIN)/python bench/serve.py

# A class at once against 1 and then 2 uvicorn workers, 60 s each (bench/load.py prints the figures).
load: install-test
	$(BIN)/python bench/load.py

# Schemathesis over every operation, at least 10,000 requests (make test runs a small subset).
fuzz: install-test
	MBI_FUZZ_EXAMPLES=$${MBI_FUZZ_EXAMPLES:-650} MBI_FUZZ_MIN_REQUESTS=10000 \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/api/test_schemathesis.py

# Recaptures every generated kernel, ships the replays, measures the tx-count probes; needs a
# Hopper GPU and CuPy in $(PYTHON) (not in .venv). `python -m app.capture.ship` alone rebuilds
# traces/*.json from traces/raw/ without a GPU.
capture:
	PYTHONPATH=. $(PYTHON) -m app.capture.gen_capture --out traces/raw && \
	  PYTHONPATH=. $(PYTHON) -m app.capture.ship && \
	  PYTHONPATH=. $(PYTHON) -m app.capture.probes --out traces/probes.json

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache test-artifacts
