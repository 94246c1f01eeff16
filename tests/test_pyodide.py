"""agentlab in Pyodide, as in the browser edition (JupyterLite): no threads, one event loop, the page's.

npm's `pyodide` under Node runs tests/pyodide/smoke.py (a few seconds) on the package's own source: every
behaviour but the blocking ones (`behaviours.BLOCKING`, which need the page's suspending `time.sleep`), a
store write with plain tool and policy, a CPU-bound model past the deadline, an abort listener, agent_loop_sync
refused, and no asyncio noise. `make test` installs npm's pyodide (lite/package-lock.json); without Node the test
is skipped, except in CI, where it must run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentlab.behaviours import ALL, BLOCKING

ROOT = Path(__file__).resolve().parent.parent
LITE = ROOT / "lite"
PYODIDE = LITE / "node_modules" / "pyodide" / "pyodide.mjs"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "Node.js is not installed (node not on PATH)"
    if not PYODIDE.exists():
        return f"npm's pyodide is not installed ({PYODIDE.relative_to(ROOT)} missing): run `make test`"
    return None


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Pyodide smoke test must run in CI: {missing}")
        pytest.skip(missing)
    script = ROOT / "tests" / "pyodide" / "smoke.py"
    done = subprocess.run(
        ["node", "smoke.mjs", str(ROOT / "agentlab"), str(script)],
        cwd=LITE,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"the smoke script failed in Pyodide:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_it_runs_in_pyodide_with_no_threads(found: dict[str, Any]) -> None:
    assert found["platform"] == "emscripten"
    assert found["threads"] is False


def test_every_behaviour_but_the_blocking_ones_holds(found: dict[str, Any]) -> None:
    assert found["behaviours"]["failed"] == {}
    assert found["behaviours"]["ran"] == len(ALL) - len(BLOCKING) > 30


def test_plain_tool_and_policy_run_inline_and_a_store_write_lands_once(found: dict[str, Any]) -> None:
    store = found["store"]
    assert (store["text"], store["writes"], store["problems"]) == ("reserved", 1, [])
    assert store["reservations"].count({"book": "A", "customer": "ada", "quantity": 1}) == 1


def test_a_cpu_bound_plain_model_overruns_and_the_error_says_by_how_much(found: dict[str, Any]) -> None:
    message = found["busy"]
    assert message.startswith("DeadlineError: deadline exceeded: the run took longer than timeout_ms=50")
    assert "held the event loop" in message and "ms past the deadline" in message
    held_ms = int(message.split("held the event loop ")[1].split(" ms")[0].replace(",", ""))
    assert 150 <= held_ms <= 5000  # it spun for 300 ms from a 50 ms deadline


def test_abort_listeners_run_without_a_thread(found: dict[str, Any]) -> None:
    assert found["listener"] == "DeadlineError"
    assert found["heard"] == ["DeadlineError"]


def test_agent_loop_sync_is_refused_with_what_to_use(found: dict[str, Any]) -> None:
    assert found["sync"].startswith("ConfigError: agent_loop_sync cannot run here")
    assert "await agent_loop(...)" in found["sync"]


def test_an_abandoned_stubborn_tool_ends_without_noise(found: dict[str, Any]) -> None:
    assert found["stubborn"] == "DeadlineError"
    assert found["noise"] == ""
