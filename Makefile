# Two commands a learner needs: `make lab` and `make test`. Each sets up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: lab test test-browser test-nbgrader lint format bench soak stress clean notebooks student

DEV_READY := $(VENV)/.dev-ready
# JupyterLab refuses to run as root (Docker, a devcontainer, a cloud VM) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
ARGS ?=

# The learner's set (requirements.txt): about a minute; pip shows what it fetches as it goes.
$(READY): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agentlab needs Python 3.11 or newer, and $(PYTHON) is %d.%d: install a newer Python, then run make again with PYTHON=python3.11 (or newer)." % sys.version_info[:2])'
	@echo "== setting up .venv with $(PYTHON): JupyterLab, ipywidgets, pytest, nbval (about a minute)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements.txt -e .
	@touch $(READY)
	@echo "== .venv is ready"

# The developers' tools on top (requirements-dev.txt): what `make test` and the other developer commands need.
$(DEV_READY): $(READY) requirements-dev.txt
	@echo "== adding the developer tools to .venv: ruff, hypothesis, pytest-xdist, playwright"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements-dev.txt
	@touch $(DEV_READY)

# Opens at the repository's root, so that both notebooks/ and agentlab/loop.py are in the file browser, with
# notebook 00 open. On a remote machine: make lab ARGS="--no-browser --ip=0.0.0.0" and open the printed URL.
lab: $(READY)  ## set up, then open JupyterLab at notebook 00 (extra options: make lab ARGS="--no-browser")
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb \
		$(ROOT_FLAG) $(ARGS)

# Two pytest workers, one test file or notebook each (--dist loadfile: a notebook's cells run in order in one
# kernel). On this 2-core machine, busy with other work, it more than halved the wall time: 445 s serial, 192 s.
test: $(DEV_READY)  ## set up, then run every test: lint, pytest, nbval
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The browser suite (tests/browser): every notebook opened and run in a real JupyterLab in headless Debian Chromium
# (/usr/bin/chromium; as root: apt-get install -y chromium), its playgrounds and approval desk moved by hand. It
# prints the folder of its screenshots. `make test` skips it: it takes minutes.
test-browser: $(DEV_READY)  ## set up, then run every notebook in JupyterLab in headless Chromium (a few minutes)
	$(BIN)/python -m pytest -m browser tests/browser

notebooks: $(DEV_READY)  ## re-execute every notebook in place from a fresh kernel: the outputs nbval compares
	$(BIN)/python tools/run_notebooks.py

student: $(DEV_READY)  ## release the workbooks with nbgrader (teachers/source -> notebooks/exercises), keeping learners' edits
	$(BIN)/python -m agentlab student

# nbgrader for real: a course of three submissions released and autograded by nbgrader, its gradebook compared with
# the checker's verdicts (tests/test_nbgrader.py). `make test` skips it: it takes a minute or two.
test-nbgrader: $(DEV_READY)  ## set up, then autograde a small nbgrader course and check the gradebook (a minute or two)
	$(BIN)/python -m pytest -m nbgrader tests/test_nbgrader.py

lint: $(DEV_READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(DEV_READY)
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

soak: $(DEV_READY)  ## 100,000 adversarial runs: outcomes, invariant violations (must be 0), deadline and abort times
	$(BIN)/python benchmarks/soak.py --examples 100000 --jobs 2

stress: $(DEV_READY)  ## 1,000 agent loops at once in one event loop with random faults: deadlines, memory, leaks
	$(BIN)/python benchmarks/stress.py --loops 1000 --rounds 3

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
