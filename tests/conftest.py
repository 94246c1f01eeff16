"""Test setup: `async def` tests run on a fresh event loop each, with no plugin needed."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


@pytest.fixture
def no_leaked_threads():
    """Fails the test if it leaves an agentlab worker thread running past a short grace."""
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.name.startswith("agentlab"):
            thread.join(timeout=2)
            assert not thread.is_alive(), f"{thread.name} still running"


@pytest.fixture
def masked() -> Callable[[str], str]:
    """Text as nbval compares it: with tests/nbval_sanitize.cfg's regexes applied (a trace's measured time masked)."""
    cfg = (Path(__file__).parent / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    rules = re.findall(r"^regex: (.*)\nreplace: (.*)$", cfg, re.M)

    def mask(text: str) -> str:
        for regex, replace in rules:
            text = re.sub(regex, replace, text)
        return text

    return mask
