"""How big and how slow is each install: the learner's set, and the developer's on top.

    python benchmarks/install.py [--python python3.11] [--req LABEL=FILE ...]

For each requirements file, a fresh venv in a temporary folder, then `pip install -r FILE -e .` with pip's cache
off (what a first install costs; a registry mirror near the machine makes the times shorter than a learner's,
the sizes and counts are the same). Prints the wall time, the number of installed distributions (`pip list`,
pip itself and agentlab left out) and the venv's size on disk.

Default: requirements.txt (what `make lab` installs) and requirements-dev.txt (what `make test` adds). To compare
with an older set: `git show REV:requirements.txt > /tmp/old.txt` and `--req before=/tmp/old.txt`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def folder_size(path: Path) -> int:
    """Bytes on disk under path (files only, symlinks not followed)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def measure(python: str, requirements: Path, workdir: Path) -> dict[str, float]:
    """One fresh install of `requirements` plus agentlab (editable): seconds, distributions, MB."""
    venv = workdir / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    start = time.perf_counter()
    subprocess.run([*pip, "install", "--quiet", "-r", str(requirements), "-e", str(ROOT)], check=True, env=env)
    seconds = time.perf_counter() - start
    listed = subprocess.run([*pip, "list", "--format=json"], check=True, capture_output=True, text=True, env=env)
    names = {d["name"].lower() for d in json.loads(listed.stdout)} - {"pip", "agentlab", "setuptools"}
    return {"seconds": seconds, "packages": len(names), "mb": folder_size(venv) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter to make the venvs with")
    parser.add_argument("--req", action="append", metavar="LABEL=FILE", help="a requirements file to measure")
    args = parser.parse_args()
    pairs = args.req or ["learner=requirements.txt", "developer=requirements-dev.txt"]
    print(f"{'install':<12}{'time, s':>10}{'packages':>10}{'size, MB':>10}   (pip cache off, {args.python})")
    for pair in pairs:
        label, _, file = pair.partition("=")
        with tempfile.TemporaryDirectory(prefix="agentlab-install-") as tmp:
            figures = measure(args.python, (ROOT / file).resolve(), Path(tmp))
        print(f"{label:<12}{figures['seconds']:>10.0f}{figures['packages']:>10}{figures['mb']:>10.0f}")


if __name__ == "__main__":
    main()
