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
* The official SDKs, for notebooks 10 and 11: the lock's openai and its closure, and anthropic (not in the lock:
  ADDED, at a version made for httpx 0.28, with its pure-Python docstring-parser), all in the site but not
  preloaded. A cell's `import openai` loads them (the kernel loads the lock's packages a cell imports), and so
  does agentlab's `client_for` (Pyodide's loadPackage, from this lock and folder only). PyPI has no emscripten
  wheel of the lock's pydantic-core 2.41.5 or jiter 0.13.0: REPLACED names the versions taken instead (the ones
  PyPI has such wheels of, and what they require), each checked by name and version like the rest. Each SDK
  package's own requirements (its METADATA) are checked against the lock's versions and written into its
  `depends`, but for NOT_LOADED (httpx's network stack, which the in-process transport replaces).
* jsonschema, for agentlab.schema (notebook 10), preloaded with agentlab (PRELOADED), at 4.17.3 (REPLACED: later
  ones need rpds-py, which PyPI has no emscripten wheel of), its requirements checked the same way.
* The contents: notebooks/ (the series) and notebooks/exercises/ (the workbooks).
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
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
# The lock's packages loaded with agentlab as the kernel starts (`loadPyodideOptions.packages`): jsonschema, which
# agentlab.schema imports when notebook 10 makes a validator. The kernel loads only what a cell's own imports name,
# and the cell imports agentlab.schema, not jsonschema; it is small (with attrs and pyrsistent, 0.2 MB).
PRELOADED = ("jsonschema",)
# In the site with what they depend on, loaded only when a notebook asks for them (notebooks 10 and 11).
ON_DEMAND = ("openai", "anthropic")
# Not in the lock: added to it, each pinned (ipywidgets 8.1.9 goes with jupyterlab_widgets 3.0.17's front end;
# anthropic 0.125.0 is the last before the SDK moved to httpx2, which Pyodide does not have).
ADDED = {
    "comm": "0.2.3",
    "ipywidgets": "8.1.9",
    "jupyterlab-widgets": "3.0.17",
    "anthropic": "0.125.0",
    "docstring-parser": "0.18.0",
}
IMPORTS = {
    "comm": ["comm"],
    "ipywidgets": ["ipywidgets"],
    "jupyterlab-widgets": ["jupyterlab_widgets"],
    "docstring-parser": ["docstring_parser"],
}
# The lock's entries taken at another version, because PyPI has no emscripten wheel of the lock's (Pyodide's own
# builds are on its CDN only), each then checked by name and version like the rest:
# * pydantic-core 2.41.5 and jiter 0.13.0: 2.50.5 and 0.19.0 have one (cp314, pyemscripten_2026_0: the lock's ABI);
#   pydantic 2.14.4 pins that pydantic-core and needs typing-extensions >= 4.16 and typing-inspection >= 0.4.4.
# * jsonschema 4.26.0 needs rpds-py (Rust), which has no emscripten wheel on PyPI at any version: jsonschema 4.17.3
#   is the last without it (attrs and pyrsistent instead; pyrsistent's pure-Python wheel, PURE).
REPLACED = {
    "pydantic": "2.14.4",
    "pydantic-core": "2.50.5",
    "jiter": "0.19.0",
    "typing-extensions": "4.16.0",
    "typing-inspection": "0.4.5",
    "jsonschema": "4.17.3",
    "pyrsistent": "0.20.0",
}
# REPLACED entries taken as PyPI's pure-Python wheel where the lock names a platform one.
PURE = ("pyrsistent",)
# Requirements of the SDK packages that the site leaves out, and why: agentlab's in-process transport stands in
# for httpx's network stack (Pyodide has no sockets), and openai's command line is not used.
NOT_LOADED = {
    "httpcore": "httpx's connections over sockets",
    "certifi": "TLS roots, for those connections",
    "tqdm": "progress bars of openai's command line",
}
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


def download(name: str, version: str, into: Path, tags: str = "py3-none-any") -> Path:
    """One wheel from PyPI (cached in `into`), exactly `name==version`: pure Python, or for the platform `tags`
    name (the lock's, such as cp314-cp314-pyemscripten_2026_0_wasm32)."""
    into.mkdir(parents=True, exist_ok=True)
    stem = "[-_.]".join(re.escape(part) for part in canonical(name).split("-"))
    pattern = re.compile(rf"^{stem}-{re.escape(version)}-.*\.whl$", re.I)
    found = [path for path in into.iterdir() if pattern.match(path.name)]
    if not found:
        _, abi, platform = tags.rsplit("-", 2)
        implementation = "py" if platform == "any" else "cp"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--only-binary=:all:", "--python-version", "3.14", "--implementation", implementation, "--abi", abi,
             "--platform", platform, "-d", str(into), f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        found = [path for path in into.iterdir() if pattern.match(path.name)]
    if len(found) != 1:
        raise BuildError(f"expected one wheel of {name}=={version} in {into}, found {[p.name for p in found]}")
    return found[0]


def requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        return email.parser.Parser().parsestr(archive.read(metadata).decode()).get_all("Requires-Dist") or []


# The environment a requirement's marker is read in: the site's Pyodide.
PYODIDE_MARKERS = {
    "python_version": "3.14",
    "python_full_version": "3.14.2",
    "sys_platform": "emscripten",
    "platform_system": "Emscripten",
    "platform_machine": "wasm32",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "extra": "",
}


def check_depends(packages: dict[str, dict], key: str, wheel: Path) -> None:
    """Every requirement of `wheel` is in the lock at a version it accepts (or in NOT_LOADED), and the lock's entry
    `key` depends on each, as PyPI's wheel does (Pyodide's own build may need less). The depends of an entry whose
    wheel is not the lock's (REPLACED, or added with none) are the wheel's requirements only."""
    from packaging.requirements import Requirement

    by_canonical = {canonical(name): name for name in packages}
    entry = packages[key]
    if canonical(key) in REPLACED or not entry.get("depends"):
        entry["depends"] = []
    for line in requirements(wheel):
        wanted = Requirement(line)
        if wanted.marker is not None and not wanted.marker.evaluate(PYODIDE_MARKERS):
            continue
        name = canonical(wanted.name)
        if name in NOT_LOADED:
            continue
        there = by_canonical.get(name)
        if there is None:
            raise BuildError(f"{wheel.name} requires {line}, which the site does not have: add it (ADDED)")
        version = REPLACED.get(name, packages[there]["version"])  # the version the site carries
        if not wanted.specifier.contains(version, prereleases=True):
            raise BuildError(f"{wheel.name} requires {line}, but the site has {there}=={version}: see REPLACED")
        if name not in {canonical(d) for d in entry["depends"]}:
            entry["depends"].append(there)


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
    # The SDKs and jsonschema, then what their wheels require (read from each wheel before going on to its depends).
    by_canonical = {canonical(key): key for key in packages}
    staged: dict[str, Path] = {}
    todo = list(ON_DEMAND + PRELOADED)
    while todo:
        key = by_canonical[canonical(todo.pop(0))]
        if key not in staged:
            staged[key] = added.get(key) or from_lock(packages[key], pyodide)
            check_depends(packages, key, staged[key])
            todo += packages[key]["depends"]
    for key in closure(packages, FROM_LOCK):  # the kernel's own: taken as the lock has them
        if key not in staged:
            staged[key] = from_lock(packages[key], pyodide)
    unused = {canonical(name) for name in REPLACED} - {canonical(key) for key in staged}
    if unused:
        raise BuildError(f"REPLACED names {sorted(unused)}, which nothing in the site needs any more: take them out")
    on_demand = set(closure(packages, ON_DEMAND))
    preload = sorted([*(name for name in added if name not in on_demand), *PRELOADED])
    if on_demand & set(closure(packages, tuple(preload))):
        raise BuildError(f"a preloaded package depends on one of {sorted(on_demand)}: they would load at start")
    (pyodide / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True))
    return preload


def from_lock(entry: dict, pyodide: Path) -> Path:
    """The lock's package `entry` from PyPI, at the lock's version (or REPLACED's), into the site; the entry is
    rewritten for that wheel (its file name, and its own hash: PyPI's file is not byte for byte Pyodide's)."""
    lock_name = entry["file_name"]
    name = canonical(entry["name"])
    version = REPLACED.get(name, entry["version"])
    tags = "py3-none-any" if name in PURE else lock_name.removesuffix(".whl").split("-", 2)[2]
    expected = f"{lock_name.split('-')[0]}-{version}-{tags}.whl"
    wheel = download(entry["name"], version, CACHE / "wheels", tags=tags)
    if wheel.name != expected:
        raise BuildError(f"PyPI's wheel of {entry['name']}=={version} is {wheel.name}, but the site needs {expected}")
    shutil.copy2(wheel, pyodide / wheel.name)
    entry.update(version=version, file_name=wheel.name, sha256=sha256(wheel))
    return wheel


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
