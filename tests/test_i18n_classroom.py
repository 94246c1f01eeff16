"""The checker, the grader and the command line in Polish: what a learner reads, and the catalog behind it.

A learner in the Polish edition runs `agentlab check --lang pl` (or has AGENTLAB_LANG=pl, or an `agentlab-lang`
file), and reads every row's title, its labels and its hint in Polish; the grader's feedback files and the GitHub
Classroom template follow the same language. What the behaviours themselves say (their "expected" and "what
happened", agentlab/behaviours.py) and the errors' messages stay English. The catalog is
agentlab/locale/pl/classroom.po: every message these files show has an entry, and every entry is shown somewhere.
"""

from __future__ import annotations

import ast
import csv
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlab import behaviours, i18n
from agentlab.__main__ import main
from agentlab.classroom import check as checker
from agentlab.classroom import grading, student, template
from agentlab.classroom.check import HINTS, check, render_html, render_text
from agentlab.i18n import _, read_po
from agentlab.lab.reference import side_by_side

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "agentlab" / "locale" / "pl" / "classroom.po"
FILES = [
    "agentlab/classroom/check.py",
    "agentlab/classroom/grading.py",
    "agentlab/classroom/student.py",
    "agentlab/classroom/template.py",
    "agentlab/lab/reference.py",
    "agentlab/__main__.py",
]
FIXTURES = ROOT / "tests" / "fixtures"
JSON_DUMPS = FIXTURES / "learners" / "json_dumps.py"  # workbook 1 with json.dumps: 4 of 5 basics rows fail
OFF_BY_ONE = FIXTURES / "loops" / "wrong" / "a__plain__turn_budget_off_by_one.py"
POLISH_WORKBOOKS = ROOT / "notebooks" / "pl" / "exercises"
# Words of the English report that must not be left in the Polish one (as whole words).
ENGLISH_UI = ("expected", "happened", "hint", "pass", "step", "every", "problem", "the same cause")


@pytest.fixture
def polish():
    """The language set to Polish for this test only."""
    i18n.set_language("pl")
    yield
    i18n.set_language(None)


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch):
    """Each test starts from English, whatever the environment says (a test that wants Polish asks for it)."""
    monkeypatch.delenv("AGENTLAB_LANG", raising=False)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


def load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"i18n_learner_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.agent_loop


def flat(text: str) -> str:
    """Text with tags dropped and line breaks and indents as single spaces: a wrapped phrase is found whole."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def polish_of(english: str) -> str:
    """The catalog's Polish for `english` (the test's own reading of the .po, not the package's)."""
    forms = dict(read_po(CATALOG.read_text(encoding="utf-8")))[english]
    return forms[0]


def no_english_ui(text: str, allowed: str = "") -> None:
    """None of the English report's own words in `text` (the behaviours' English sentences in `allowed` aside)."""
    rest = flat(text)
    for sentence in allowed.split("\n"):
        if sentence:
            rest = rest.replace(flat(sentence), " ")
    for word in ENGLISH_UI:
        assert not re.search(rf"\b{word}\b", rest), (word, rest)


# -- the checker, as a learner runs it ----------------------------------------------------------------------------


def test_check_lang_pl_shows_polish_titles_labels_and_hints(capsys) -> None:
    assert main(["check", "--lang", "pl", str(JSON_DUMPS), "--step", "basics", "--seed", "1"]) == 1
    out = capsys.readouterr().out
    shown = flat(out)
    assert "etap 'basics': zaliczono 1 z 5" in shown, out
    assert "✓ model_sees_snapshot Cokolwiek model zrobi z otrzymanymi wiadomościami" in shown
    assert "✗ compact_json_results Wynik narzędzia wraca jako zwarty JSON" in shown
    assert "oczekiwano" in out and "co się stało" in out and "wskazówka" in out
    assert "Wynik narzędzia ma spacje po ':' i ','" in shown  # the json.dumps hint, in Polish
    assert "ta sama przyczyna co przy result_reaches_model wyżej" in shown
    assert "etap 'basics'" in shown and "`compact_json(result)`" in shown  # code stays as it is
    expected = "\n".join(line.split("oczekiwano", 1)[1] for line in out.splitlines() if "oczekiwano" in line)
    happened = "\n".join(line.split("co się stało", 1)[1] for line in out.splitlines() if "co się stało" in line)
    no_english_ui(out, allowed=f"{expected}\n{happened}")  # what the behaviours say stays English


def test_check_without_lang_is_english_and_unchanged(capsys) -> None:
    assert main(["check", str(JSON_DUMPS), "--step", "basics", "--seed", "1"]) == 1
    default = capsys.readouterr().out
    assert main(["check", "--lang", "en", str(JSON_DUMPS), "--step", "basics", "--seed", "1"]) == 1
    assert capsys.readouterr().out == default
    assert "step 'basics': 1 of 5 pass" in default and "the same cause as for result_reaches_model above" in flat(
        default
    )
    assert "      expected  " in default and "      happened  " in default and "      hint      " in default
    assert not any(word in default for word in ("oczekiwano", "wskazówka", "zaliczon", "etap ", "Wynik narzędzia"))
    assert i18n.language() == "en"  # --lang lasts for the command only


def test_check_json_keeps_keys_and_machine_values_english(capsys) -> None:
    assert main(["check", "--lang", "pl", str(JSON_DUMPS), "--step", "basics", "--seed", "1", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"target", "step", "score", "passed", "total", "rows", "hints"}
    assert data["step"] == "basics" and data["passed"] == 1
    by_key = {row["key"]: row for row in data["rows"]}
    row = by_key["compact_json_results"]
    assert set(row) == {
        "key",
        "title",
        "step",
        "reference",
        "passed",
        "expected",
        "happened",
        "clue",
        "hint",
        "hint_id",
    }
    assert (row["step"], row["clue"], row["hint_id"]) == ("basics", "json_format", "diagnosis/json_spaces")
    assert row["title"] == polish_of(behaviours.get("compact_json_results").title)
    assert row["hint"] == polish_of(checker._JSON_SPACES[1])
    assert {hint["key"] for hint in data["hints"]} == {r["key"] for r in data["rows"] if not r["passed"]}


def test_a_submission_that_cannot_be_checked_says_so_in_polish(capsys, tmp_path) -> None:
    assert main(["check", "--lang", "pl", str(tmp_path / "nowhere.py")]) == 2
    err = capsys.readouterr().err
    assert "nowhere.py: no such file" in err  # the package's error, as it is
    assert "(nie ma czego sprawdzić: podaj plik .py" in err and len(err.strip().splitlines()) == 1
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n", encoding="utf-8")
    assert main(["check", "--lang", "pl", str(empty)]) == 2
    assert f"agentlab check: {empty} nie definiuje agent_loop (async def agent_loop(" in capsys.readouterr().err


def test_in_a_notebook_the_report_follows_the_language_in_force(polish) -> None:
    report = check(load(JSON_DUMPS), step="basics")
    text, page = render_text(report), render_html(report)
    for shown in (text, page):
        assert "etap 'basics': zaliczono 1 z 5" in flat(shown)
        assert polish_of(behaviours.get("history_shape").title) in flat(shown)
        assert flat(shown).count("Wynik narzędzia ma spacje po") == 1  # said once, then referred to
    assert "<td" in page and ">oczekiwano<" in page and ">co się stało<" in page and ">wskazówka<" in page
    assert "ta sama przyczyna co przy <code" in page
    assert report._repr_html_() == page
    failed = report.failures[0]
    no_english_ui(text, allowed="\n".join(f"{row.expected}\n{row.happened}" for row in report.failures))
    assert failed.title == polish_of(behaviours.get(failed.key).title)
    from agentlab import agent_loop

    assert check(agent_loop, step="basics").headline() == "agentlab.loop.agent_loop, etap 'basics': zaliczono wszystkie"
    assert check(agent_loop, name="agent_loop").headline() == "agent_loop, wszystkie etapy: zaliczono wszystkie"
    i18n.set_language("en")  # the same loop, in English: the English texts, as HINTS and the behaviours have them
    english = check(load(JSON_DUMPS), step="basics")
    assert [row.title for row in english.rows] == [b.title for b in behaviours.select("basics")]
    assert english.failures[0].hint == checker._JSON_SPACES[1]


def test_an_unloadable_submission_and_a_non_function_in_polish(polish) -> None:
    report = check(42, step="basics")
    text = render_text(report)
    assert "agent_loop to 42, a nie funkcja" in text and "Zdefiniuj funkcję: async def agent_loop(" in flat(text)
    assert "  problem    " in text and "  wskazówka  " in text
    assert report.rows[0].expected == "funkcji agent_loop do uruchomienia"


async def hangs_politely(input, model, tools, **options):
    """A workbook-2 loop that lets an empty calls list through, so it asks the model again forever (yielding)."""
    import asyncio

    from agentlab import AgentResult, ModelOutputError, Usage

    history = [{"role": "user", "content": input}]
    while True:
        await asyncio.sleep(0)
        decision = await model(list(history), None)
        if not isinstance(decision, dict) or decision.get("kind") not in ("final", "tools"):
            raise ModelOutputError(f"malformed decision: {decision!r}")
        if decision["kind"] == "final":
            if not isinstance(decision.get("text"), str):
                raise ModelOutputError(f"malformed decision: {decision!r}")
            return AgentResult(decision["text"], history, Usage(1, 0))
        if not isinstance(decision.get("calls"), list):
            raise ModelOutputError(f"malformed decision: {decision!r}")
        for proposed in decision["calls"]:
            if not (isinstance(proposed, dict) and isinstance(proposed.get("args"), dict) and proposed.get("id")):
                raise ModelOutputError(f"malformed call: {proposed!r}")
            if not isinstance(proposed["id"], str) or not isinstance(proposed.get("name"), str):
                raise ModelOutputError(f"malformed call: {proposed!r}")
        for proposed in decision["calls"]:
            await tools[proposed["name"]].run(proposed["args"], None)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_hang_names_its_case_in_polish(polish) -> None:
    [row] = check(hangs_politely, step="shapes").rows
    assert (row.clue, row.hint_id) == ("hung", "malformed_decisions/hung")
    case = '{"kind": "tools", "calls": []}'
    assert row.hint.startswith(f"agent_loop nie zakończył działania, gdy model odpowiedział {case}. Decyzja, "), row
    assert "never finished" not in row.hint


def test_every_hang_hint_opens_as_the_case_naming_expects() -> None:
    """A hint that opens with "agent_loop never finished." must open with its Polish in Polish: `_name_the_case`
    puts the case inside that opening, whatever the language."""
    opening = "agent_loop never finished."
    for text in HINTS.values():
        if text.startswith(opening):
            assert polish_of(text).startswith(polish_of(opening)), text


def test_a_row_that_crashed_the_behaviour_reads_in_polish(polish) -> None:
    async def returns_a_string(input, model, tools, **options):
        return "done"

    [row, *_rest] = check(returns_a_string, step="basics").rows
    assert row.hint == polish_of(checker._NOT_A_RESULT[1])
    assert row.title == polish_of(behaviours.get("result_reaches_model").title)


# -- the grader: feedback files ------------------------------------------------------------------------------------


def test_the_graders_feedback_is_polish_and_its_csv_columns_stay_english(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AGENTLAB_LANG", "pl")
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ada.py").write_text(OFF_BY_ONE.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "bob").mkdir()  # handed in nothing
    assert main(["grade", str(folder), "--step", "budgets", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "oceniono 2 prace: " in out and "i plik z informacją zwrotną dla każdego ucznia w" in out
    grades = tmp_path / "class-grades"
    with (grades / "grades.csv").open(encoding="utf-8") as file:
        rows = list(csv.reader(file))
    assert rows[0] == [
        "student",
        "submission",
        "step",
        "tool_and_turn_budgets",
        "budget_before_running",
        "limits_reached_exactly",
        "passed",
        "total",
        "score",
        "problem",
    ]
    assert rows[2][0] == "bob" and rows[2][-1] == "nie znaleziono pracy"  # a cell a student reads
    ada = (grades / "ada.txt").read_text(encoding="utf-8")
    assert ada.startswith("ada, etap 'budgets': zaliczono 1 z 3\n"), ada
    assert polish_of(behaviours.get("tool_and_turn_budgets").title) in ada
    assert "max_turns to liczba dozwolonych wywołań modelu" in flat(ada)  # the hint for > where >= belongs
    bob = (grades / "bob.txt").read_text(encoding="utf-8")
    assert "problem    nie znaleziono pracy (pliku .py ani zeszytu ćwiczeń)" in bob
    assert "wskazówka  Oddaj jeden plik .py (albo zeszyt ćwiczeń), który definiuje agent_loop." in bob


def test_the_child_process_gets_the_language(tmp_path, monkeypatch) -> None:
    """The rows are made in the grading child: without AGENTLAB_LANG passed on, they would come back English and
    (their titles not matching) be failed as not reported."""
    cheat = FIXTURES / "cheats" / "delegate_import.py"
    i18n.set_language("pl")
    graded = grading.grade(str(cheat), "basics", seed=5)
    row = graded.report.rows[0]
    assert row.clue == "delegated" and row.title == polish_of(behaviours.get(row.key).title)
    assert row.happened.startswith("agent_loop przekazał uruchomienie własnej pętli pakietu agentlab (")
    assert row.hint == polish_of(grading._DELEGATED[1])
    i18n.set_language("en")
    english = grading.grade(str(cheat), "basics", seed=5).report.rows[0]
    assert english.happened.startswith("agent_loop handed the run to agentlab's own loop (")


def test_why_the_grading_process_stopped_in_polish(polish) -> None:
    status = grading._Status(returncode=-24)
    assert grading._why_it_stopped(status, []) == (
        "proces oceniania zakończył się sygnałem SIGXCPU: zużył więcej czasu procesora niż limit"
    )
    report = grading._decide("ada", "budgets", behaviours.select("budgets"), [], grading._Status(returncode=0))
    text = render_text(report)  # the child said nothing: every row failed, for one reason said once
    assert "problem    proces oceniania zakończył się (kod wyjścia 0), zanim uruchomił to zachowanie" in text, text
    assert "wskazówka  Proces oceniania zatrzymał się, zanim uruchomił to zachowanie." in text
    assert report.rows[0].expected == "uruchomienia tego zachowania przez proces oceniania i zgłoszenia jego wyniku"
    status = grading._Status(returncode=3, stderr_tail="boom\n")
    said = grading._why_it_stopped(status, [])
    assert said.startswith("proces oceniania zakończył się (kod wyjścia 3)") and said.endswith(
        " (ostatnie wyjście: boom)"
    )


# -- GitHub Classroom: the template, its README and workflow, a row's step --------------------------------------------


def test_classroom_init_lang_pl_writes_the_polish_starter_repository(tmp_path, capsys) -> None:
    course = tmp_path / "kurs"
    assert main(["classroom", "init", "--lang", "pl", str(course)]) == 0
    out = capsys.readouterr().out
    assert f"zapisano {course / 'README.md'}" in out and "ocenia 7 zeszytów ćwiczeń przy każdym pushu" in out
    for path in sorted(POLISH_WORKBOOKS.glob("*.ipynb")):  # the Polish twins, byte for byte
        assert (course / path.name).read_bytes() == path.read_bytes()
    assert (course / i18n.MARKER).read_text(encoding="utf-8") == "pl\n"
    readme = (course / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# Pętla agenta w 7 zeszytach ćwiczeń\n")
    assert "## Praca" in readme and "## Ocenianie" in readme and "razem 51" in readme
    assert "| zeszyt ćwiczeń | punkty | sprawdź sam |" in readme
    assert "| `01_basics.ipynb` | 5 | `python -m agentlab check 01_basics.ipynb` |" in readme
    assert "You write" not in readme and "Grading" not in readme
    workflow = (course / template.WORKFLOW).read_text(encoding="utf-8")
    commands = re.findall(r'\n {10}command: "(.*)"', workflow)
    assert len(commands) == 51 and all(
        c.startswith("AGENTLAB_LANG=pl python -X utf8 -m agentlab classroom row ") for c in commands
    )
    title = polish_of(behaviours.get("result_reaches_model").title)
    assert f'test-name: "01_basics · result_reaches_model: {title}"' in workflow
    assert "name: Autograding Tests" in workflow  # the names Classroom looks for stay as they are


def test_a_polish_workflow_step_run_as_the_command_grader_runs_it(tmp_path) -> None:
    """The command grader passes its command only a few variables of its own: AGENTLAB_LANG is on the command line,
    and /bin/sh passes it to agentlab."""
    course = tmp_path / "kurs"
    i18n.set_language("pl")
    template.init(course)
    workflow = (course / template.WORKFLOW).read_text(encoding="utf-8")
    command = next(c for c in re.findall(r'\n {10}command: "(.*)"', workflow) if c.endswith(" malformed_decisions"))
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    env |= {"FORCE_COLOR": "true", "DOTNET_CLI_HOME": "/tmp", "DOTNET_NOLOGO": "true"}
    done = subprocess.run(["/bin/sh", "-c", command], cwd=course, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done  # the workbook as handed out: not written yet
    said = flat(done.stderr)
    assert "02_shapes.ipynb: zaliczone wiersze: 0 z 1; ten wiersz nie przechodzi:" in said, done.stderr
    assert polish_of(behaviours.get("malformed_decisions").title) in said
    assert flat(polish_of(checker._DIAGNOSES[NotImplementedError][1])) in said


def test_classroom_init_in_english_is_unchanged(tmp_path) -> None:
    course = tmp_path / "course"
    template.init(course, "agentlab==0.1.0")
    assert not (course / i18n.MARKER).exists()
    readme = (course / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# The agent loop, in 7 workbooks\n\nYou write `agent_loop`, the loop around")
    assert "| workbook | points | check it yourself |" in readme
    workflow = (course / template.WORKFLOW).read_text(encoding="utf-8")
    assert "AGENTLAB_LANG" not in workflow
    assert 'test-name: "01_basics · result_reaches_model: A tool result with the right call id reaches the model."' in (
        workflow
    )


def test_a_classroom_row_says_why_it_fails_in_polish(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["classroom", "row", "--lang", "pl", "01_basics.ipynb", "history_shape"]) == 1
    err = capsys.readouterr().err
    assert "01_basics.ipynb: 0 punktów, z powodu podanego niżej; ten wiersz nie przechodzi:" in err
    assert "01_basics.ipynb: no such file" in err and "Przywróć zeszyt ćwiczeń pod tą nazwą." in err
    assert "(wszystkie wiersze, we własnym terminalu: python -m agentlab check 01_basics.ipynb)" in err


def test_a_kept_report_is_kept_per_language(tmp_path, monkeypatch) -> None:
    """A workbook's report waits for its other rows under a key that includes the language: a Polish row is not
    read from an English report."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    book = tmp_path / "02_shapes.ipynb"
    book.write_bytes((POLISH_WORKBOOKS / "02_shapes.ipynb").read_bytes())
    english = template.workbook_report(str(book))
    i18n.set_language("pl")
    polish = template.workbook_report(str(book))
    assert english["rows"][0]["title"] == behaviours.get("malformed_decisions").title
    assert polish["rows"][0]["title"] == polish_of(behaviours.get("malformed_decisions").title)
    assert len(list((tmp_path / "home" / ".cache" / "agentlab-classroom").glob("*.json"))) == 2


# -- the command line ------------------------------------------------------------------------------------------------


def test_help_in_polish(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--lang", "pl", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("użycie: python -m agentlab check")
    assert "argumenty pozycyjne:" in out and "opcje:" in out and "pokaż tę pomoc i zakończ" in out
    assert "plik .py, oddany zeszyt ćwiczeń (.ipynb) albo moduł, który definiuje agent_loop" in flat(out)
    assert "wypisz wynik w JSON dla oceniających" in flat(out)
    with pytest.raises(SystemExit):
        main(["demo", "--lang=pl", "--help"])
    out = capsys.readouterr().out
    assert "przypadki (--case):" in out and "proponuje deleteEverything, narzędzie, które nie istnieje" in out
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    english = capsys.readouterr().out
    assert english.startswith("usage: python -m agentlab check") and "positional arguments:" in english
    assert "show this help message and exit" in english and "--lang {en,pl}" in english


def test_demo_in_polish_keeps_the_rules_own_words(capsys) -> None:
    assert main(["demo", "--lang", "pl", "--max-turns", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("błąd: ") and "turn budget" in err[0]


def test_classroom_init_errors_keep_their_message_and_add_a_polish_sentence(tmp_path, capsys) -> None:
    assert main(["classroom", "init", "--lang", "pl", str(tmp_path / "c"), "--python", "three"]) == 2
    err = capsys.readouterr().err.strip()
    assert "give a Python version such as 3.12" in err and err.endswith("(nie zapisano repozytorium startowego)")


def test_the_students_command_summary_in_polish(polish) -> None:
    folder = student.LEARNERS
    for count, noun in ((1, "zeszyt"), (3, "zeszyty"), (7, "zeszytów"), (12, "zeszytów"), (22, "zeszyty")):
        paths = [folder / f"{n:02}.ipynb" for n in range(count)]
        said = student.Outcome(written=paths[:1], current=paths[1:], released=paths).summary()
        assert said.startswith(f"nbgrader wydał {count} {noun} ćwiczeń do "), said
        assert f"zapisane: 1, już aktualne: {count - 1}, zachowane z powodu zmian ucznia: 0" in said


def test_the_reference_tests_headings_follow_the_language(polish) -> None:
    shown = side_by_side("unknown_tool")
    assert shown.text().startswith("Test z ćwiczenia (JavaScript)\n")
    assert "Jego odpowiednik w Pythonie (agentlab/behaviours.py, unknown_tool)" in shown.text()
    assert "Test z ćwiczenia (JavaScript)" in shown.html() and "The exercise" not in shown.html()
    i18n.set_language("en")
    assert side_by_side("unknown_tool").text().startswith("The exercise's test (JavaScript)\n")
    assert "The exercise’s test (JavaScript)" in side_by_side("unknown_tool").html()


# -- the catalog -----------------------------------------------------------------------------------------------------


def literal_messages(functions: tuple[str, ...] = ("_", "ngettext")) -> dict[str, str]:
    """Every constant first argument of `_(...)` and `ngettext(...)` in the files: msgid -> file."""
    found: dict[str, str] = {}
    for name in FILES:
        for node in ast.walk(ast.parse((ROOT / name).read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in functions
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, name)
    return found


def shown_constants() -> set[str]:
    """The English texts the files pass to `_` from a table or constant: titles, hints, the README's paragraphs."""
    import agentlab.__main__ as command_line

    shown = {b.title for b in behaviours.ALL}
    shown |= set(HINTS.values())
    shown |= {text for _id, text in checker._DIAGNOSES.values()}
    shown |= {
        value[1]
        for value in vars(checker).values()
        if isinstance(value, tuple) and len(value) == 2 and str(value[0]).startswith("diagnosis/")
    }
    shown |= {checker._FALLBACK}
    shown |= set(grading._EXPECTED.values()) | set(grading._SIGNAL_CAUSES.values()) | {grading._NO_SUBMISSION}
    shown |= {grading._DELEGATED[1], grading._TAMPERED[1], grading._STOPPED[1]}
    shown |= {template._README_INTRO, template._README_WORKING, template._README_GRADING, template._README_KEEP}
    shown |= {command_line.EXAMPLES, *command_line.CASES.values()}
    return shown


def catalog() -> dict[str, list[str]]:
    return {msgid: forms for msgid, forms in read_po(CATALOG.read_text(encoding="utf-8")) if msgid}


def test_every_message_of_these_files_has_a_polish_entry() -> None:
    entries = catalog()
    missing = sorted((set(literal_messages()) | shown_constants()) - set(entries))
    assert not missing, missing
    assert all(all(forms) for forms in entries.values())  # no empty msgstr: it would show the English


def test_every_entry_is_shown_by_one_of_these_files() -> None:
    stale = sorted(set(catalog()) - set(literal_messages()) - shown_constants())
    assert not stale, stale


def test_the_catalog_is_well_formed() -> None:
    text = CATALOG.read_text(encoding="utf-8")
    header = dict(read_po(text))[""][0]
    assert "Content-Type: text/plain; charset=UTF-8\n" in header and "Language: pl\n" in header
    assert (
        "Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\n"
        in header
    )
    blocks = [
        block
        for block in text.split("\n\n")
        if "\nmsgid " in f"\n{block}" and 'msgid ""\nmsgstr ""\n"Content' not in block
    ]
    assert all(re.search(r"^#: agentlab/\S+\.py$", block, re.M) for block in blocks)
    entries = catalog()
    plurals = literal_messages(("ngettext",))
    assert plurals and all(len(entries[msgid]) == 3 for msgid in plurals)
    assert all(len(forms) == 1 for msgid, forms in entries.items() if msgid not in plurals)
    ids = [msgid for msgid, _forms in read_po(text)]
    assert len(ids) == len(set(ids))


CONTRACT = (
    "unknown tool",
    "duplicate call id",
    "tool budget",
    "turn budget",
    "deadline",
    "context budget",
    "output budget",
)
QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)")


def test_each_translation_keeps_the_placeholders_symbols_and_edges() -> None:
    placeholder = re.compile(r"\{[^{}]*\}")
    for msgid, forms in catalog().items():
        for form in forms:
            assert Counter(placeholder.findall(form)) == Counter(placeholder.findall(msgid)), (msgid, form)
            for symbol in "✓✗→…`":
                assert form.count(symbol) == msgid.count(symbol), (symbol, msgid, form)
            assert form[: len(form) - len(form.lstrip())] == msgid[: len(msgid) - len(msgid.lstrip())], msgid
            assert form[len(form.rstrip()) :] == msgid[len(msgid.rstrip()) :], msgid
            for quote in QUOTED.findall(msgid):  # 'unknown tool', TurnBudgetError('turn budget ...'): kept as is
                if any(phrase in quote for phrase in CONTRACT):
                    assert form.count(quote) == msgid.count(quote), (quote, msgid, form)


def test_no_entry_is_in_another_catalog() -> None:
    mine = set(catalog())
    for path in sorted(CATALOG.parent.glob("*.po")):
        if path != CATALOG:
            theirs = {msgid for msgid, _forms in read_po(path.read_text(encoding="utf-8")) if msgid}
            assert not mine & theirs, (path.name, sorted(mine & theirs))


def test_the_catalog_uses_the_glossarys_terms() -> None:
    rows = [line for line in (ROOT / "docs" / "pl" / "glossary.md").read_text(encoding="utf-8").splitlines()]
    banned = []
    for line in rows:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("English", "---"):
            banned += [form.strip() for form in cells[2].split(",") if form.strip()]
    assert "tura" in banned and "podpowiedź" in banned
    polish = "\n".join(form for forms in catalog().values() for form in forms)
    for form in banned:
        assert not re.search(rf"(?<!\w){re.escape(form)}", polish, re.I), form
    for term in ("zeszyt ćwiczeń", "sprawdzarka", "wskazówka", "etap", "budżet kroków", "budżet wywołań", "termin"):
        assert re.search(rf"(?<!\w){term}", polish, re.I), term


def test_plural_forms_follow_polish(polish) -> None:
    forms = {
        n: i18n.ngettext("{n} task of the run was still running", "{n} tasks of the run were still running", n)
        for n in (1, 2, 5, 12, 22, 25)
    }
    assert forms[1].startswith("{n} zadanie ") and forms[2].startswith("{n} zadania ")
    assert forms[5] == forms[12] == forms[25] and forms[5].startswith("{n} zadań ") and forms[22] == forms[2]
    assert checker._short("x" * 405, 400).endswith("… (+5 znaków)")
    assert checker._short("x" * 402, 400).endswith("… (+2 znaki)")
    assert checker._short("x" * 401, 400).endswith("… (+1 znak)")
    i18n.set_language("en")
    assert checker._short("x" * 401, 400).endswith("… (+1 chars)")  # as it always said


def test_the_wrapping_is_at_call_time() -> None:
    """A module-level constant holds the English; the language is looked up when a row is made."""
    assert _(HINTS["*/hung"]) == HINTS["*/hung"]
    i18n.set_language("pl")
    assert _(HINTS["*/hung"]) == polish_of(HINTS["*/hung"])
    assert HINTS["*/hung"].startswith("agent_loop never finished.")
