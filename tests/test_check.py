"""The checker: it survives any student code, explains each failure, renders, and grades from the command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agentlab import agent_loop
from agentlab.__main__ import main
from agentlab.behaviours import ALL, EXTRA_STEPS, STEPS, select
from agentlab.classroom.check import HINTS, Report, check, render_html
from agentlab.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 0.75


def test_the_package_loop_passes_every_row() -> None:
    report = check(agent_loop)
    assert report.passed, str(report)
    assert [row.key for row in report.rows] == [b.key for b in select()]
    assert (report.points, report.total, report.score) == (len(select()), len(select()), 1.0)


@pytest.mark.parametrize("step", STEPS + EXTRA_STEPS)
def test_a_step_checks_exactly_its_behaviours(step: str) -> None:
    report = check(agent_loop, step=step)
    assert [row.key for row in report.rows] == [b.key for b in select(step)]
    assert report.passed and report.step == step


def test_an_unknown_step_names_the_steps() -> None:
    with pytest.raises(ConfigError, match="the steps are: basics, shapes, checks"):
        check(agent_loop, step="everything")


# -- whatever the student's code does, a failed row with a clear message -------------------------------------------


async def raises_anything(input, model, tools, **options):
    raise ZeroDivisionError("oops")


async def returns_none(input, model, tools, **options):
    await model([{"role": "user", "content": input}], None)


def never_awaits(input, model, tools, **options):
    return {"text": "done", "history": []}


async def not_written_yet(input, model, tools, **options):
    raise NotImplementedError()


async def too_few_parameters(input, model, tools):
    return None


async def blocks_its_thread(input, model, tools, **options):
    time.sleep(2.5)


async def loops_forever(input, model, tools, **options):
    while True:
        pass


async def swallows_cancellation(input, model, tools, **options):
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)


LEAKED: list[asyncio.Task] = []


async def leaks_a_task(input, model, tools, **options):
    LEAKED.append(asyncio.ensure_future(asyncio.sleep(3600)))
    return await agent_loop(input, model, tools, **options)


async def raises_past_the_checks(input, model, tools, **options):
    raise SystemExit("bye")


class Hostile:
    """A result whose attributes explode when read."""

    @property
    def text(self):
        raise RuntimeError("you may not read this")

    history = property(text.fget)


async def returns_a_hostile_result(input, model, tools, **options):
    return Hostile()


@pytest.mark.parametrize(
    ("impl", "step", "hint_id", "happened"),
    [
        (raises_anything, "basics", "*/raised", "ZeroDivisionError: oops"),
        (returns_none, "basics", "diagnosis/not_a_result", ""),
        (never_awaits, "basics", "diagnosis/not_async", "define it with `async def`"),
        (not_written_yet, "basics", "diagnosis/not_implemented", "NotImplementedError"),
        (blocks_its_thread, "limits", "*/hung", "still running after 0.75 s"),
        (loops_forever, "limits", "*/hung", "still running after 0.75 s"),
        (swallows_cancellation, "limits", "*/hung", "still running after 0.75 s"),
        (leaks_a_task, "basics", "*/leaked_tasks", "1 task of the run (sleep) was still running"),
        (raises_past_the_checks, "basics", "*/crashed", "SystemExit: bye"),
        (returns_a_hostile_result, "basics", "*/crashed", "you may not read this"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_any_student_code_gets_a_failed_row_not_a_hung_or_crashed_checker(impl, step, hint_id, happened) -> None:
    started = time.perf_counter()
    report = check(impl, step=step, bound_s=BOUND_S)
    assert time.perf_counter() - started < len(report.rows) * (BOUND_S + 2.0)  # generous: a loaded machine is slow
    assert not report.passed and report.points == 0
    row = report.rows[-1]
    assert row.hint_id == hint_id, str(report)
    assert happened in row.happened
    assert row.hint


def test_a_wrong_signature_is_named() -> None:
    report = check(too_few_parameters, step="budgets", bound_s=BOUND_S)
    assert {row.hint_id for row in report.rows} == {"diagnosis/signature"}
    assert "max_turns=6" in report.rows[0].hint


def test_something_that_is_not_a_function_fails_every_row() -> None:
    report = check(None, step="limits")
    assert [row.passed for row in report.rows] == [False, False]
    assert report.rows[0].happened == "agent_loop is None, not a function"


def test_an_abandoned_runaway_thread_is_stopped_soon_after() -> None:
    before = set(threading.enumerate())
    check(loops_forever, step="limits", bound_s=0.2)
    spinning = [t for t in set(threading.enumerate()) - before if t.name.startswith("agentlab-check context")]
    assert len(spinning) == 2
    for thread in spinning:
        thread.join(timeout=10)
        assert not thread.is_alive(), f"{thread.name}: the spinning thread the checker abandoned is still running"


# -- hints -----------------------------------------------------------------------------------------------------------


def test_every_hint_is_keyed_by_a_real_behaviour_and_a_real_clue() -> None:
    keys = {b.key for b in ALL}
    source = (ROOT / "agentlab" / "behaviours.py").read_text(encoding="utf-8")
    checker_clues = {"hung", "leaked_tasks", "crashed"}  # the checker's own verdicts, not a behaviour's
    for entry in HINTS:
        behaviour, _, clue = entry.partition("/")
        assert behaviour == "*" or behaviour in keys, entry
        for part in clue.split(":"):
            assert part in checker_clues or part == "*" or f'"{part}' in source, f"{entry}: no clue {part!r}"


def test_every_behaviour_has_hints_of_its_own() -> None:
    assert not [b.key for b in ALL if not any(entry.startswith(f"{b.key}/") for entry in HINTS)]


# -- rendering -------------------------------------------------------------------------------------------------------


async def shouts_html(input, model, tools, **options):
    raise ValueError("<script>alert('hi')</script>")


def test_the_html_table_escapes_what_student_code_says() -> None:
    report = check(shouts_html, step="limits")
    page = render_html(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert page.count("<tr class='failed'") == 2
    assert report._repr_html_() == page


def test_the_text_report_is_a_line_per_row_and_the_details_of_failures() -> None:
    text = str(check(raises_anything, step="budgets"))
    assert text.splitlines()[0].endswith("test_check.raises_anything, step 'budgets': 0 of 3 pass")
    assert text.count("✗") == 3 and text.count("expected") == 3 and text.count("hint") == 3
    lines = repr(check(agent_loop, step="limits")).splitlines()
    assert all(len(line) < 100 for line in lines)  # a long title wraps under itself
    title = select("limits")[1].title
    assert lines[-2:] == textwrap.wrap(f"  ✓ context_counts_calls         {title}", 99, subsequent_indent=" " * 33)


def test_the_report_is_the_same_on_every_run() -> None:
    assert render_html(check(raises_anything)) == render_html(check(raises_anything))


def test_json_holds_score_rows_and_hints() -> None:
    data = check(raises_anything, step="checks").to_json()
    assert (data["score"], data["passed"], data["total"]) == (0.0, 0, len(select("checks")))
    assert {"key", "passed", "expected", "happened", "hint", "clue"} <= set(data["rows"][0])
    assert [h["key"] for h in data["hints"]] == [b.key for b in select("checks")]
    json.dumps(data)


# -- the command line -------------------------------------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_cli_passes_a_correct_file_with_exit_code_0(tmp_path, capsys) -> None:
    right = ROOT / "tests" / "fixtures" / "loops" / "right" / "timeout__duck_signal.py"
    target = write(tmp_path, "solution.py", right.read_text(encoding="utf-8"))
    assert main(["check", target, "--step", "checks"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{target}, step 'checks': all pass"


def test_cli_json_for_a_broken_file_exits_1(tmp_path, capsys) -> None:
    target = write(tmp_path, "broken.py", "async def agent_loop(input, model, tools, **options):\n    return None\n")
    assert main(["check", target, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == len(select()) and 0 <= data["passed"] < len(select())
    assert data["hints"] and all(hint["hint"] for hint in data["hints"])


@pytest.mark.parametrize(
    ("text", "happened"),
    [
        ("def agent_loop(:\n", "SyntaxError"),
        ("raise RuntimeError('at import')\n", "RuntimeError: at import"),
    ],
)
def test_cli_a_file_that_cannot_be_loaded_fails_every_row(tmp_path, capsys, text, happened) -> None:
    target = write(tmp_path, "solution.py", text)
    assert main(["check", target, "--step", "deadline", "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == len(select("deadline")) and all(happened in row["happened"] for row in rows)


def test_cli_checks_a_module_by_name(capsys) -> None:
    assert main(["check", "agentlab.loop", "--step", "limits"]) == 0


def test_cli_checks_a_submitted_workbook_at_its_own_step(capsys) -> None:
    assert main(["check", str(ROOT / "teachers" / "source" / "workbooks" / "04_budgets.ipynb")]) == 0
    assert "step 'budgets': all pass" in capsys.readouterr().out
    assert main(["check", str(ROOT / "notebooks" / "exercises" / "04_budgets.ipynb"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["step"] == "budgets"
    assert {row["hint_id"] for row in data["rows"]} == {"diagnosis/not_implemented"}


def test_cli_refuses_an_unknown_step(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["check", "agentlab.loop", "--step", "nope"])
    assert re.search(r"invalid choice: 'nope'", capsys.readouterr().err)


def test_report_is_importable_without_running_anything() -> None:
    assert Report("x", None, ()).passed is False
