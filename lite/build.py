"""Build the browser edition: a static JupyterLite site of the series, Python in the page, nothing from a CDN.

    make lite                      # runs this in lite/.venv: the site in lite/dist
    python lite/build.py [--out DIR]

What goes into it, and from where (downloads at build time only, from npm and PyPI; the site asks for nothing
outside its own folder at run time):

* JupyterLab and the Pyodide kernel: jupyterlite-core and jupyterlite-pyodide-kernel (lite/requirements.txt, in
  the build environment lite/.venv); jupyterlab_widgets there brings the ipywidgets front end.
* Pyodide's runtime: npm's `pyodide` package (lite/package-lock.json), copied to the site's static/pyodide, where
  the kernel addon finds it and points `pyodideUrl` at it.
* The Python packages the kernel loads: npm's package has Pyodide's lock (pyodide-lock.json) but none of its
  wheels, so the pure-Python ones the kernel needs (micropip, IPython and what it depends on, jedi) are
  downloaded from PyPI at exactly the version the lock names, and the lock's sha256 is rewritten for each (PyPI's
  file is not byte for byte Pyodide's). A wheel whose name or version differs from the lock's stops the build.
* What the lock does not have (comm, ipywidgets, jupyterlab_widgets, and an agentlab wheel built from this
  repository) is added to it, and named in the kernel's `loadPyodideOptions.packages`, so that every notebook can
  `import agentlab` with no `%pip` cell. `disablePyPIFallback` keeps piplite from ever asking PyPI.
* The contents: notebooks/ (the series) and notebooks/exercises/ (the workbooks).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LITE = Path(__file__).resolve().parent
ROOT = LITE.parent
CACHE = LITE / ".cache"
NPM_PYODIDE = LITE / "node_modules" / "pyodide"
# The runtime core of npm's pyodide package: what loadPyodide fetches before any package.
RUNTIME = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
PYODIDE_VERSION = "314.0.7"  # lite/package.json pins the same
# The lock's packages the kernel loads as it starts (piplite installs ipython and jedi; micropip comes first).
FROM_LOCK = ("micropip", "ipython", "jedi")
# Not in the lock: added to it, each pinned (ipywidgets 8.1.9 goes with jupyterlab_widgets 3.0.17's front end).
ADDED = {"comm": "0.2.3", "ipywidgets": "8.1.9", "jupyterlab-widgets": "3.0.17"}
IMPORTS = {"comm": ["comm"], "ipywidgets": ["ipywidgets"], "jupyterlab-widgets": ["jupyterlab_widgets"]}
KERNEL = "@jupyterlite/pyodide-kernel-extension:kernel"


class BuildError(Exception):
    """A step of the build that cannot go on; its message says what to do."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def closure(packages: dict[str, dict], names: tuple[str, ...]) -> list[str]:
    """The lock's names of `names` and everything they depend on, in the lock."""
    by_canonical = {canonical(key): key for key in packages}
    seen: list[str] = []
    todo = list(names)
    while todo:
        key = by_canonical.get(canonical(todo.pop()))
        if key is None or key in seen:
            continue
        seen.append(key)
        todo.extend(packages[key].get("depends", []))
    return sorted(seen)


def download(name: str, version: str, into: Path) -> Path:
    """One pure-Python wheel from PyPI (cached in `into`), exactly `name==version`."""
    into.mkdir(parents=True, exist_ok=True)
    stem = "[-_.]".join(re.escape(part) for part in canonical(name).split("-"))
    pattern = re.compile(rf"^{stem}-{re.escape(version)}-.*\.whl$", re.I)
    found = [path for path in into.iterdir() if pattern.match(path.name)]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--only-binary=:all:", "--python-version", "3.14", "--implementation", "py", "--abi", "none",
             "--platform", "any", "-d", str(into), f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        found = [path for path in into.iterdir() if pattern.match(path.name)]
    if len(found) != 1:
        raise BuildError(f"expected one wheel of {name}=={version} in {into}, found {[p.name for p in found]}")
    return found[0]


def agentlab_wheel(into: Path) -> Path:
    """A wheel of this repository's agentlab, built fresh from a copy that also carries the solved workbook
    notebook 07b shows (agentlab/lab/model_answer/): in the browser there is no repository to read it from."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="agentlab-wheel-") as folder:
        copy = Path(folder)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, copy / name)
        shutil.copytree(ROOT / "agentlab", copy / "agentlab", ignore=shutil.ignore_patterns("__pycache__"))
        answers = copy / "agentlab" / "lab" / "model_answer"
        answers.mkdir()
        for solved in (ROOT / "teachers" / "source" / "workbooks").glob("*_limits.ipynb"):
            shutil.copy2(solved, answers / solved.name)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--no-build-isolation", "-w", str(into), str(copy)],
            check=True,
        )  # fmt: skip
    (wheel,) = into.glob("agentlab-*.whl")
    return wheel


def stage_pyodide(static: Path) -> list[str]:
    """Pyodide's runtime, its lock rewritten for the wheels the site carries; returns the packages to preload."""
    if not (NPM_PYODIDE / "pyodide.mjs").exists():
        raise BuildError(f"{NPM_PYODIDE} is missing: run `cd lite && npm ci` (make lite does)")
    declared = json.loads((NPM_PYODIDE / "package.json").read_text())["version"]
    if declared != PYODIDE_VERSION:
        raise BuildError(f"npm's pyodide is {declared}, but this build is pinned to {PYODIDE_VERSION}: npm ci")
    pyodide = static / "pyodide"
    pyodide.mkdir(parents=True)
    for name in RUNTIME:
        shutil.copy2(NPM_PYODIDE / name, pyodide / name)
    lock = json.loads((pyodide / "pyodide-lock.json").read_text())
    packages = lock["packages"]
    for key in closure(packages, FROM_LOCK):
        entry = packages[key]
        wheel = download(entry["name"], entry["version"], CACHE / "wheels")
        if wheel.name != entry["file_name"]:
            raise BuildError(
                f"PyPI's wheel of {entry['name']}=={entry['version']} is {wheel.name}, "
                f"but the lock names {entry['file_name']}"
            )
        shutil.copy2(wheel, pyodide / wheel.name)
        entry["sha256"] = sha256(wheel)  # PyPI's build of the same version: its own hash
    added = {name: download(name, version, CACHE / "wheels") for name, version in ADDED.items()}
    added["agentlab"] = agentlab_wheel(CACHE / "agentlab")
    for name, wheel in added.items():
        version = wheel.name.split("-")[1]
        if name in ADDED and version != ADDED[name]:
            raise BuildError(f"{wheel.name} is not {name}=={ADDED[name]}")
        shutil.copy2(wheel, pyodide / wheel.name)
        packages[name] = {
            "name": name,
            "version": version,
            "file_name": wheel.name,
            "install_dir": "site",
            "package_type": "package",
            "sha256": sha256(wheel),
            "imports": IMPORTS.get(name, [name]),
            "depends": [],
            "unvendored_tests": False,
        }
    (pyodide / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True))
    return sorted(added)


def site_config(preload: list[str]) -> dict:
    """jupyter-lite.json: the kernel loads the added packages as it starts, and never falls back to PyPI."""
    return {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "agentlab",
            "litePluginSettings": {
                KERNEL: {"disablePyPIFallback": True, "loadPyodideOptions": {"packages": preload}},
            },
        },
    }


# JupyterLab's settings for a learner on the site: a notebook starts its kernel as it opens (JupyterLab 4.6 asks
# otherwise, the notebooks' kernelspec being CPython's), and no news or update checks, which would leave the page.
OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def contents(into: Path) -> Path:
    """The notebooks as a learner opens them: the series, and the workbooks in exercises/."""
    target = into / "contents"
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.sqlite3", "*.db")
    shutil.copytree(ROOT / "notebooks", target, ignore=ignore)
    return target


def build(out: Path) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentlab-lite-") as folder:
        source = Path(folder)
        preload = stage_pyodide(source / "static")
        (source / "jupyter-lite.json").write_text(json.dumps(site_config(preload), indent=1))
        notebooks = contents(source)
        (source / "overrides.json").write_text(json.dumps(OVERRIDES, indent=1))
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "jupyter", "lite", "build", "--lite-dir", str(source), "--output-dir", str(out),
             "--contents", str(notebooks), "--apps", "lab", "--no-sourcemaps", "--no-unused-shared-packages",
             "--settings-overrides", str(source / "overrides.json")],
            check=True,
            cwd=source,
        )  # fmt: skip
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    print(f"== the browser edition is in {out}: {size / 1e6:.1f} MB, built in {time.monotonic() - started:.0f} s")
    print("   serve it from any static host, or here: make lite-serve")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=LITE / "dist", help="the site's folder (default: lite/dist)")
    try:
        build(parser.parse_args().out.resolve())
    except BuildError as error:
        print(f"lite/build.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
