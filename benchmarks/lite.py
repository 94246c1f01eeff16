"""The browser edition's figures: build time, the site's size, and how long a learner waits in Chromium.

    make lite && .venv/bin/python benchmarks/lite.py [--no-build]

Prints the time `lite/build.py` takes (skipped with --no-build), the size of lite/dist in all and by its biggest
parts, and, in headless Chromium on 127.0.0.1 with a cold cache, the time from opening notebook 00 to an idle
Pyodide kernel and the time its Run All takes. Nothing is asserted: tests/lite checks what the site does.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "lite" / "dist"
sys.path[:0] = [str(ROOT / "tests" / "browser"), str(ROOT / "tests" / "lite")]


def size(path: Path) -> int:
    if not path.is_dir():
        return path.stat().st_size
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--no-build", action="store_true", help="measure lite/dist as it is")
    if not parser.parse_args().no_build:
        python = ROOT / "lite" / ".venv" / "bin" / "python"
        started = time.monotonic()
        subprocess.run([str(python), "lite/build.py"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print(f"build: {time.monotonic() - started:.1f} s (lite/build.py, its downloads cached)")
    total = size(SITE)
    print(f"site: {total / 1e6:.1f} MB in lite/dist")
    parts = [*SITE.iterdir(), *(SITE / "static").iterdir()]
    for part, bytes_ in sorted(((p, size(p)) for p in parts if p.name != "static"), key=lambda x: -x[1])[:6]:
        print(f"  {part.relative_to(SITE)}: {bytes_ / 1e6:.1f} MB")

    import conftest
    from lab_harness import LAPTOP, NOTEBOOKS, NotebookPage, start_chromium, stop_chromium, wait_for

    served, server = conftest.serve()
    browser = start_chromium(Path(tempfile.mkdtemp(prefix="agentlab-lite-bench-")))
    try:
        context = browser.browser.new_context(viewport=LAPTOP, service_workers="block")
        context.route("**/*", conftest.only_here(served))
        page = context.new_page()
        source = NOTEBOOKS / "00_start_here.ipynb"
        notebook = NotebookPage(page, "00_start_here", json.loads(source.read_text()), Path(tempfile.gettempdir()))
        started = time.monotonic()
        page.goto(f"{served.url}/lab/index.html?path=00_start_here.ipynb")
        wait_for("the cells", lambda: len(notebook.cells()) == len(notebook.source["cells"]), 180)
        notebook.wait_idle("an idle kernel", 180)
        print(f"notebook 00 opened to an idle Pyodide kernel: {time.monotonic() - started:.1f} s (cold cache)")
        started = time.monotonic()
        notebook.run_all()
        notebook.wait_all_executed()
        print(f"notebook 00, Run All: {time.monotonic() - started:.1f} s (the last second is the harness's quiet wait)")
        print(f"requests outside 127.0.0.1: {len(served.outside)}")
    finally:
        stop_chromium(browser)
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
