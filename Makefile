# Two commands a learner needs: `make lab` and `make test`. Each sets up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: lab test test-browser lint format bench soak stress clean notebooks student

$(READY): requirements.txt pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "agentlab needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -e .
	touch $(READY)

lab: $(READY)  ## set up, then open JupyterLab on the notebooks
	$(BIN)/jupyter lab notebooks/00_start_here.ipynb

# Two pytest workers, one test file or notebook each (--dist loadfile: a notebook's cells run in order in one
# kernel). On this 2-core machine, busy with other work, it more than halved the wall time: 445 s serial, 192 s.
test: $(READY)  ## set up, then run every test: lint, pytest, nbval
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The browser suite (tests/browser): every notebook opened and run in a real JupyterLab in headless Debian Chromium
# (/usr/bin/chromium; as root: apt-get install -y chromium), its playgrounds and approval desk moved by hand. It
# prints the folder of its screenshots. `make test` skips it: it takes minutes.
test-browser: $(READY)  ## set up, then run every notebook in JupyterLab in headless Chromium (a few minutes)
	$(BIN)/python -m pytest -m browser tests/browser

notebooks: $(READY)  ## re-execute every notebook in place from a fresh kernel: the outputs nbval compares
	$(BIN)/python tools/run_notebooks.py

student: $(READY)  ## write the student versions of notebooks/exercises/ (solutions cut out) into its student/
	$(BIN)/python -m agentlab student

lint: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(READY)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The comparison frameworks go into benchmarks/.venv, never into the learner's .venv.
BENCH_VENV := benchmarks/.venv
BENCH_READY := $(BENCH_VENV)/.ready

$(BENCH_READY): benchmarks/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r benchmarks/requirements.txt
	touch $(BENCH_READY)

bench: $(BENCH_READY)  ## agentlab vs. a bare loop, pydantic-ai and openai-agents: one table (a few minutes)
	$(BENCH_VENV)/bin/python benchmarks/bench.py

soak: $(READY)  ## 100,000 adversarial runs: outcomes, invariant violations (must be 0), deadline and abort times
	$(BIN)/python benchmarks/soak.py --examples 100000 --jobs 2

stress: $(READY)  ## 1,000 agent loops at once in one event loop with random faults: deadlines, memory, leaks
	$(BIN)/python benchmarks/stress.py --loops 1000 --rounds 3

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
