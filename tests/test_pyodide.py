"""agentlab in Pyodide, as in the browser edition (JupyterLite): no threads, one event loop, the page's.

npm's `pyodide` under Node runs tests/pyodide/smoke.py (a few seconds) on the package's own source: every
behaviour but the blocking ones (`behaviours.BLOCKING`, which need the page's suspending `time.sleep`), a
store write with plain tool and policy, a CPU-bound model past the deadline, an abort listener, agent_loop_sync
refused, and no asyncio noise. `make test` installs npm's pyodide (lite/package-lock.json); without Node the test
is skipped, except in CI, where it must run. Once the browser edition is built (`make lite`), the same script also
loads the site's own wheels of the SDKs (openai 2, anthropic 0.x, httpx 0.28) and runs the scripted exchange through
them and the in-process loopback; before that build, those tests are skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentlab.behaviours import ALL, BLOCKING

ROOT = Path(__file__).resolve().parent.parent
LITE = ROOT / "lite"
PYODIDE = LITE / "node_modules" / "pyodide" / "pyodide.mjs"
SITE_PYODIDE = LITE / "dist" / "static" / "pyodide"  # the built site's Pyodide (make lite), with the SDKs' wheels


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "Node.js is not installed (node not on PATH)"
    if not PYODIDE.exists():
        return f"npm's pyodide is not installed ({PYODIDE.relative_to(ROOT)} missing): run `make test`"
    return None


def _site_sdk_wheels() -> list[str]:
    """The wheels of openai, anthropic and what they depend on, as the built site carries them (none if unbuilt)."""
    lock_path = SITE_PYODIDE / "pyodide-lock.json"
    if not lock_path.exists():
        return []
    packages = json.loads(lock_path.read_text())["packages"]
    by_name = {re.sub(r"[-_.]+", "-", name).lower(): name for name in packages}
    seen: list[str] = []
    todo = ["openai", "anthropic"]
    while todo:
        name = by_name.get(re.sub(r"[-_.]+", "-", todo.pop()).lower())
        if name is None or name in seen:
            continue
        seen.append(name)
        todo.extend(packages[name].get("depends", []))
    wheels = [SITE_PYODIDE / packages[name]["file_name"] for name in seen]
    return [str(wheel) for wheel in wheels if wheel.exists()] if "anthropic" in seen else []


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
        env={**os.environ, "AGENTLAB_SMOKE_WHEELS": json.dumps(_site_sdk_wheels())},
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


@pytest.fixture(scope="module")
def sdk(found: dict[str, Any]) -> dict[str, Any]:
    if "sdk" not in found:
        pytest.skip(f"the site is not built ({SITE_PYODIDE.relative_to(ROOT)} has no SDK wheels): run `make lite`")
    return found["sdk"]


def test_the_sites_sdks_talk_to_the_in_process_loopback_with_no_socket_or_thread(sdk: dict[str, Any]) -> None:
    openai_version, anthropic_version, httpx_version = sdk["versions"]
    assert openai_version.startswith("2.") and anthropic_version.startswith("0.") and httpx_version == "0.28.1"
    assert sdk["chat"] == "A is in."
    assert sdk["anthropic"] == ["in", ["/v1/messages", "/v1/messages"], "tool_result", "toolu_1"]
    assert sdk["threads"] == 1


def test_in_pyodide_a_stall_ends_at_the_deadline_and_no_other_url_is_reached(sdk: dict[str, Any]) -> None:
    kind, took = sdk["stall"]
    assert kind == "DeadlineError" and took < 5
    assert sdk["refused"].startswith("ConfigError: the browser edition has no network: https://api.openai.com")


def test_an_sdk_not_loaded_yet_is_loaded_by_client_for_or_named_with_what_to_run(sdk: dict[str, Any]) -> None:
    # Under Node there is no JS Promise integration, so client_for cannot wait for the load (Chromium's can).
    assert sdk["unloaded"] == "made" or sdk["unloaded"].startswith("ConfigError: anthropic needs its SDK")
    assert sdk["unloaded"] == "made" or "run `import anthropic` in a cell" in sdk["unloaded"]
