"""The README's example runs, and says what it prints."""

from __future__ import annotations

import ast
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_the_loop_in_one_screen_runs_as_written() -> None:
    block = re.search(r"## The loop in one screen\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no 'loop in one screen' example"
    code = compile(block.group(1), "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict = {}
    await eval(code, namespace)  # the example awaits at top level, as in a notebook cell
    result = namespace["result"]
    assert result.text == 'found it: {"id":"A","title":"The Pragmatic Programmer"}'
    assert [m["role"] for m in result.history] == ["user", "assistant", "tool", "assistant"]
    assert result.history[2]["call_id"] == "c1"
    assert (result.usage.turns, result.usage.calls) == (2, 1)


def test_the_quick_start_is_two_commands_and_says_the_measured_install_time() -> None:
    text = README.read_text()
    quick = re.search(r"## Quick start\n(.*?)\n### ", text, re.S)
    assert quick, "README.md has no Quick start"
    block = re.search(r"```\n(.*?)```", quick.group(1), re.S)
    assert block and [line.split()[:2] for line in block.group(1).splitlines()] == [["make", "lab"], ["make", "test"]]
    makefile = (README.parent / "Makefile").read_text()
    for where, said in (("README.md", quick.group(1)), ("Makefile", makefile)):
        assert "about a minute" not in said, f"{where}: the install was measured at 1 to 4 minutes, not about a minute"
        assert "1 to 4 minutes" in said and "benchmarks/install.py" in said, f"{where}: say what was measured, and how"
