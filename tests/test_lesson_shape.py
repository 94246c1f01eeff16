"""The series has one shape, and what it says about itself is true.

Each notebook opens with its objective, prerequisites and time and ends with a link to the next one in the
reading order; notebook 00's table lists every notebook with the time its header gives; each "Try this" has its
answers; each notebook has a self-check quiz of its own; each lesson built on one of the exercise's seven tests
shows that test beside its port and runs it on the lesson's naive loop, expecting it to fail; and the prose uses
the glossary's words.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from test_notebooks import SERIES

from agentlab.lab.quiz import names as quiz_names

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
READING_ORDER = SERIES  # the series in its reading order, defined once in test_notebooks.py
AFTER_THE_LAST = "exercises/01_basics"
# The lessons that port one of the exercise's seven tests, and that test.
SEVEN = {
    "01_call_ids": "result_reaches_model",
    "02_tool_names": "unknown_tool",
    "03_tool_args": "invalid_args_never_run",
    "04_budgets": "tool_and_turn_budgets",
    "05_duplicate_ids": "duplicate_call_id",
    "06_deadline": "deadline_ignoring_signal",
    "07_limits_and_cancellation": "context_output_cancellation",
}
HEADER = re.compile(
    r"^# .+\n\n- \*\*Objective:\*\* .+\n(?:  .+\n)*"
    r"- \*\*Prerequisites:\*\* .+\n(?:  .+\n)*"
    r"- \*\*Time:\*\* about (\d+) minutes",
    re.MULTILINE,
)


def cells(stem: str) -> list[nbformat.NotebookNode]:
    return nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells


def minutes(stem: str) -> int:
    match = HEADER.search(cells(stem)[0].source)
    assert match, f"{stem}: its first cell has no title, objective, prerequisites and time (see 00_start_here)"
    return int(match[1])


def test_the_reading_order_is_every_notebook_of_the_series() -> None:
    on_disk = {path.stem for path in NOTEBOOKS.glob("*.ipynb")} - {"cheatsheet"}
    assert set(READING_ORDER) == on_disk


@pytest.mark.parametrize("stem", READING_ORDER)
def test_each_notebook_opens_with_objective_prerequisites_and_time(stem: str) -> None:
    assert 3 <= minutes(stem) <= 60


@pytest.mark.parametrize("stem", READING_ORDER)
def test_each_notebook_ends_with_a_link_to_the_next(stem: str) -> None:
    position = READING_ORDER.index(stem)
    following = READING_ORDER[position + 1] if position + 1 < len(READING_ORDER) else AFTER_THE_LAST
    last = cells(stem)[-1]
    assert last.cell_type == "markdown"
    assert f"**Next:** [{following}]({following}.ipynb)" in last.source, f"{stem} should end by pointing at {following}"
    assert (NOTEBOOKS / f"{following}.ipynb").exists()


def test_notebook_00_lists_every_notebook_in_order_with_its_time() -> None:
    table = next(cell.source for cell in cells("00_start_here") if "| notebook |" in cell.source)
    listed = re.findall(r"^\| \d+ \| \[(\w+)\]\(\1\.ipynb\) \| .+ \| (\d+) min \|$", table, flags=re.MULTILINE)
    assert [stem for stem, _ in listed] == list(READING_ORDER[1:])
    for stem, time in listed:
        assert int(time) == minutes(stem), f"00 says {stem} takes {time} minutes, its header says {minutes(stem)}"
    total = sum(minutes(stem) for stem in READING_ORDER[1:])
    assert f"In all about {round(total / 60, 1):g} hours" in table


@pytest.mark.parametrize("stem", READING_ORDER)
def test_try_this_comes_with_its_answers(stem: str) -> None:
    tries = [cell.source for cell in cells(stem) if cell.cell_type == "markdown" and "## Try this" in cell.source]
    for source in tries:
        after = source.split("## Try this", 1)[1]
        opened = after.find("<details><summary>Answers</summary>")
        assert opened >= 0 and after.find("</details>", opened) > opened, f"{stem}: Try this has no collapsed answers"


@pytest.mark.parametrize("stem", READING_ORDER)
def test_each_notebook_has_its_own_quiz(stem: str) -> None:
    sources = [cell.source for cell in cells(stem) if cell.cell_type == "code"]
    assert any(f'quiz("{stem}")' in source for source in sources), f"{stem} shows no quiz({stem!r})"
    assert stem in quiz_names(), f"agentlab/lab/quizzes/{stem}.json is missing"


def test_every_quiz_belongs_to_a_notebook() -> None:
    assert set(quiz_names()) <= set(READING_ORDER)


@pytest.mark.parametrize(("stem", "key"), sorted(SEVEN.items()))
def test_a_lesson_shows_the_original_test_and_runs_it_on_its_naive_loop(stem: str, key: str) -> None:
    source = "\n".join(cell.source for cell in cells(stem) if cell.cell_type == "code")
    assert f'side_by_side("{key}")' in source, f"{stem} does not show the JavaScript test beside its port"
    assert f'await verify("{key}", agent_loop)' in source
    assert f'await verify("{key}", naive_loop, expect_failure=True)' in source
    assert "naive=naive_loop" in source, f"{stem}'s playground has no toggle to the naive loop"


# "reject" is the JavaScript's word (assert.rejects) and an attribute's name (`.rejected`): in code, not in prose.
REJECT = re.compile(r"\breject(s|ed|ing|ion|ions)?\b", re.IGNORECASE)


@pytest.mark.parametrize("stem", READING_ORDER)
def test_the_prose_says_refuse_not_reject(stem: str) -> None:
    for cell in cells(stem):
        if cell.cell_type != "markdown":
            continue
        prose = re.sub(r"```.*?```", "", cell.source, flags=re.DOTALL)
        prose = re.sub(r"`[^`]*`", "", prose)
        assert not REJECT.search(prose), f"{stem}: '{REJECT.search(prose)[0]}' in prose; the glossary says refuse"


@pytest.mark.parametrize("stem", [*READING_ORDER, "cheatsheet"])
def test_printed_lines_fit_a_laptop_screen(stem: str) -> None:
    """JupyterLab breaks printed text anywhere, mid-word included, past the output's width (about 100 characters at
    1280 px with the file browser open): a saved printed line, or a plain value shown without HTML, stays under it."""
    for number, cell in enumerate(cell for cell in cells(stem) if cell.cell_type == "code"):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text = output["text"]
            elif "data" in output and "text/html" not in output["data"]:
                text = output["data"].get("text/plain", "")
            else:
                continue
            long = [line for line in text.splitlines() if len(line) > 100]
            assert not long, f"{stem}, code cell {number}: {len(long[0])} characters: {long[0][:60]}..."


# Where the rule is the store's (09c's key, 09d's transaction) or the adapter's (10's wire format), a loop without
# it changes nothing: those lessons compare a store or an adapter without the rule in their "Without the rule".
NO_TOGGLE = {"09c_at_most_once": "the store's key", "09d_whole_or_nothing": "the store's", "10_real_model": "adapter"}


PAGES = ("00_start_here", "05b_asyncio_primer", "07b_the_whole_loop")  # pages, not lessons: no playground


@pytest.mark.parametrize("stem", [s for s in READING_ORDER if s not in PAGES and s not in NO_TOGGLE])
def test_a_lesson_playground_toggles_to_its_naive_loop(stem: str) -> None:
    source = "\n".join(cell.source for cell in cells(stem) if cell.cell_type == "code")
    assert re.search(r'playground\("\w+", naive=naive_loop', source), f"{stem}'s playground has no naive toggle"
    assert "async def naive_loop(" in source
