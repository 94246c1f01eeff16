"""`python -m agentlab demo`, and `import agentlab` pulling in nothing but the standard library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentlab.__main__ import main
from agentlab.lab.examples import BOUNDARY_CASES


def test_demo_prints_the_trace_which_gives_the_answer_once_up_top(capsys) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "✓ answered: Pune: rain, 18°C" and out.count("Pune: rain, 18°C") == 2  # + final:
    assert 'call call_1: getWeather({"city":"Pune"})' in out
    assert "turns 2 / 5" in out


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--max-turns", "1"], "turn budget"),
        (["--max-calls", "0"], "tool budget"),
        (["--max-chars", "10"], "context budget"),
        (["--timeout-ms", "20", "--delay-ms", "200"], "deadline"),
        (["--case", "unknown-tool"], "unknown tool"),
        (["--case", "invalid-city"], "invalid args"),
        (["--case", "same-call-twice"], "repeated tool call without progress"),
        (["--max-turns", "-1"], "max_turns must be"),
    ],
)
def test_a_tripped_limit_is_one_clear_line_and_exit_code_1(capsys, flags, phrase) -> None:
    assert main(["demo", *flags]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and phrase in err[0]


def test_demo_help_says_what_each_case_does(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert all(f"  {case} " in out for case in ["weather", *BOUNDARY_CASES]) and "examples:" in out


def test_import_agentlab_loads_the_core_only() -> None:
    """The folders are optional parts: `import agentlab` (and a run) loads none of them; render_text loads lab/."""
    code = (
        "import sys, asyncio, agentlab\n"
        "from agentlab import agent_loop\n"
        "async def model(messages, signal): return {'kind': 'final', 'text': 'ok'}\n"
        "asyncio.run(agent_loop('q', model))\n"
        "optional = ('lab', 'classroom', 'writes', 'models', 'testing')\n"
        "folders = lambda: sorted({m.split('.')[1] for m in sys.modules"
        " if m.startswith('agentlab.') and m.split('.')[1] in optional})\n"
        "print(folders()); agentlab.render_text; print(folders())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "['lab']"]


def test_import_agentlab_uses_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules)\n"
        "import agentlab, agentlab.behaviours, agentlab.lab.trace, agentlab.lab.fakes, agentlab.lab.scenarios\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(n for n in new if n not in sys.stdlib_module_names and n != 'agentlab'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
