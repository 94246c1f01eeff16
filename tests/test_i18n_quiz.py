"""The self-check quizzes in Polish: every quiz has a Polish twin that asks the same (same questions, choices in the
same order, same answers, the same code names and numbers), quiz.py shows it and its own words in Polish when the
language is pl, at call time, and the English quizzes are byte for byte what the English notebooks saved.
The catalog agentlab/locale/pl/quiz.po holds exactly quiz.py's msgids, with their placeholders and symbols kept."""

from __future__ import annotations

import ast
import html
import json
import re
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlab import i18n
from agentlab.lab import quiz as quiz_module
from agentlab.lab.quiz import Question, names, questions, quiz

ROOT = Path(__file__).resolve().parent.parent
QUIZZES = ROOT / "agentlab" / "lab" / "quizzes"
CATALOG = ROOT / "agentlab" / "locale" / "pl" / "quiz.po"
SOURCES = [ROOT / "agentlab" / "lab" / "quiz.py"]  # the files whose _() and ngettext() strings quiz.po translates
PLACEHOLDER = re.compile(r"\{\w*\}")
SYMBOLS = "✓✗→←…•·"
ENGLISH_UI = ("Self-check", "questions", "run this cell", "answer is checked", "Right.", "Not quite")


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("AGENTLAB_LANG", raising=False)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


@pytest.fixture
def polish() -> None:
    i18n.set_language("pl")


def raw(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


# -- the Polish quiz data ----------------------------------------------------------------------------------------------


def test_the_polish_quizzes_are_the_english_ones_no_more_no_fewer() -> None:
    assert names(), "no quiz at all"
    assert sorted(path.name for path in (QUIZZES / "pl").iterdir()) == [f"{name}.json" for name in names()]


def structure_problems(english: list[dict[str, Any]], polish: list[dict[str, Any]]) -> list[str]:
    """How a Polish quiz fails to ask what its English twin asks (empty: it asks the same)."""
    if len(polish) != len(english):
        return [f"{len(polish)} questions, the English has {len(english)}"]
    problems = []
    for number, (en, pl) in enumerate(zip(english, polish, strict=True), 1):
        if set(pl) != set(en) or set(en) != {"question", "choices", "answer", "why"}:
            problems.append(f"question {number}: the keys {sorted(pl)}")
            continue
        if len(pl["choices"]) != len(en["choices"]):
            problems.append(f"question {number}: {len(pl['choices'])} choices, the English has {len(en['choices'])}")
            continue
        if pl["answer"] != en["answer"] or not isinstance(pl["answer"], int):
            problems.append(f"question {number}: the answer is {pl['answer']!r}, the English {en['answer']!r}")
        texts = [
            (pl["question"], en["question"]),
            (pl["why"], en["why"]),
            *zip(pl["choices"], en["choices"], strict=True),
        ]
        for translated, original in texts:
            if not isinstance(translated, str) or translated.strip() != translated or not translated:
                problems.append(f"question {number}: {translated!r} is not a trimmed text")
            elif translated == original:
                problems.append(f"question {number}: left in English: {original!r}")
        if not pl["question"].endswith("?") or len(pl["why"]) <= 20:
            problems.append(f"question {number}: not a question with its reason")
        if len(set(pl["choices"])) != len(pl["choices"]):
            problems.append(f"question {number}: two choices read the same")
    return problems


@pytest.mark.parametrize("name", names())
def test_each_polish_quiz_has_the_english_structure_and_answers(name: str) -> None:
    assert structure_problems(raw(QUIZZES / f"{name}.json"), raw(QUIZZES / "pl" / f"{name}.json")) == []


def test_a_dropped_choice_or_a_moved_answer_would_be_found() -> None:
    """The structure check is not vacuous."""
    english, polish = raw(QUIZZES / "04_budgets.json"), raw(QUIZZES / "pl" / "04_budgets.json")
    dropped = [dict(polish[0], choices=polish[0]["choices"][:-1]), *polish[1:]]
    moved = [dict(polish[0], answer=(polish[0]["answer"] + 1) % len(polish[0]["choices"])), *polish[1:]]
    untranslated = [dict(polish[0], why=english[0]["why"]), *polish[1:]]
    assert "choices, the English has" in structure_problems(english, dropped)[0]
    assert "the answer is" in structure_problems(english, moved)[0]
    assert "left in English" in structure_problems(english, untranslated)[0]
    assert "questions, the English has" in structure_problems(english, polish[:-1])[0]


def code_names(text: str) -> set[str]:
    """The names in `text` that are code (max_calls, agent_loop, ToolBudgetError, deleteEverything, __class__).

    Proper nouns such as JavaScript are not: Polish inflects them (w JavaScripcie)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
    return {word for word in words if "_" in word or re.match(r"[a-z]+[A-Z]", word) or word.endswith("Error")}


@pytest.mark.parametrize("name", names())
def test_each_polish_quiz_keeps_the_code_names_and_numbers(name: str) -> None:
    """A translation may not change a fact: every number and every code name of the English stays, in each text."""
    english, polish = raw(QUIZZES / f"{name}.json"), raw(QUIZZES / "pl" / f"{name}.json")
    for en, pl in zip(english, polish, strict=True):
        pairs = [(pl["question"], en["question"]), (pl["why"], en["why"])]
        for translated, original in [*pairs, *zip(pl["choices"], en["choices"], strict=True)]:
            assert Counter(re.findall(r"\d+", translated)) == Counter(re.findall(r"\d+", original)), translated
            assert code_names(original) <= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", translated)), translated


def glossary_avoided() -> list[str]:
    rows = re.findall(
        r"^\| ([^|]+?) \| ([^|]+?) \| ([^|]*?) ?\|$", (ROOT / "docs/pl/glossary.md").read_text("utf-8"), re.M
    )
    return [form.strip().lower() for _en, _pl, avoid in rows[2:] for form in avoid.split(",") if form.strip()]


def test_no_polish_quiz_text_uses_a_form_the_glossary_rules_out() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in (QUIZZES / "pl").glob("*.json"))
    text += "\n" + "\n".join("\n".join(forms) for _msgid, forms in i18n.read_po(CATALOG.read_text("utf-8")))
    text = text.lower()
    assert glossary_avoided(), "the glossary's 'not' column was not read"
    assert [form for form in glossary_avoided() if re.search(r"\b" + re.escape(form), text)] == []
    for term in ("identyfikator wywołania", "partia", "krok", "termin", "budżet wywołań", "stanowisko zatwierdzania"):
        words = [re.escape(word[:-2] if len(word) > 4 else word) + r"\w*" for word in term.split()]
        assert re.search(r"\b" + r"\s+".join(words), text), term  # in any case form: stanowisku zatwierdzania


def test_the_wheel_carries_the_polish_quizzes() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    line = next(line for line in pyproject.splitlines() if line.startswith('"agentlab.lab" = '))
    assert '"quizzes/*.json"' in line and '"quizzes/pl/*.json"' in line and '"model_answer/*.ipynb"' in line


# -- quiz.py in Polish -------------------------------------------------------------------------------------------------


def test_the_language_is_read_when_the_quiz_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    english, polish = raw(QUIZZES / "04_budgets.json"), raw(QUIZZES / "pl" / "04_budgets.json")
    assert [q.text for q in questions("04_budgets")] == [entry["question"] for entry in english]
    monkeypatch.setenv("AGENTLAB_LANG", "pl")
    asked = questions("04_budgets")
    assert [q.text for q in asked] == [entry["question"] for entry in polish]
    assert [q.choices for q in asked] == [tuple(entry["choices"]) for entry in polish]
    assert [q.why for q in asked] == [entry["why"] for entry in polish]
    i18n.set_language("en")  # set_language outranks the environment, and the next call sees it
    assert quiz("04_budgets").questions[0].text == english[0]["question"]


@pytest.mark.parametrize("name", names())
def test_the_loaded_polish_quiz_answers_as_the_english_one(name: str) -> None:
    i18n.set_language("en")
    english = questions(name)
    i18n.set_language("pl")
    polish = questions(name)
    assert [(len(q.choices), q.answer) for q in polish] == [(len(q.choices), q.answer) for q in english]
    assert all(p.text != e.text for p, e in zip(polish, english, strict=True))


def test_the_saved_quiz_reads_in_polish(polish: None) -> None:
    shown = quiz("04_budgets")
    saved = shown._repr_mimebundle_()
    text, page = saved["text/plain"], saved["text/html"]
    header = "Sprawdź się, 4 pytania: uruchom tę komórkę, żeby odpowiedzieć; każda odpowiedź jest sprawdzana."
    assert text.splitlines()[0] == header
    assert (
        "<div style='opacity:.68'>Sprawdź się, 4 pytania: uruchom tę komórkę, żeby odpowiedzieć; każda odpowiedź "
        "jest sprawdzana od razu, gdy ją wybierzesz.</div>" in page
    )
    first = raw(QUIZZES / "pl" / "04_budgets.json")[0]
    assert first["question"][:60] in text and html.escape(first["question"]) in page
    assert f"a) {first['choices'][0]}" in text and f"<li>{html.escape(first['choices'][0])}</li>" in page
    for word in ENGLISH_UI:
        assert word not in text and word not in page, word
    for question in shown.questions:  # a saved Polish notebook gives no answer away either
        assert question.why not in text and html.escape(question.why) not in page


@pytest.mark.parametrize(
    ("count", "phrase"), [(1, "1 pytanie:"), (2, "2 pytania:"), (3, "3 pytania:"), (5, "5 pytań:")]
)
def test_the_number_of_questions_takes_its_polish_form(polish: None, count: int, phrase: str) -> None:
    shown = quiz("09d_whole_or_nothing")  # five questions: the others are cut off
    shown.questions = shown.questions[:count]
    assert shown._snapshot_text().startswith(f"Sprawdź się, {phrase} ")
    assert f"Sprawdź się, {phrase} " in shown._snapshot_html()


def test_each_polish_verdict_is_polish(polish: None) -> None:
    for name in names():
        shown = quiz(name)
        for number, question in enumerate(shown.questions, 1):
            right = question.choices[question.answer]
            for choice in range(len(question.choices)):
                verdict = shown.verdict(number, choice)
                if choice == question.answer:
                    assert verdict == f"✓ Dobrze. {question.why}"
                else:
                    assert verdict == f"✗ Niezupełnie: poprawna odpowiedź to „{right}”. {question.why}"


def test_the_polish_buttons_answer_in_polish(polish: None) -> None:
    shown = quiz("04_budgets")
    first = shown._widget().children[0]
    title, buttons, verdict = first.children
    question = shown.questions[0]
    assert html.escape(question.text) in title.value
    assert buttons.options[0][0] == f"a) {question.choices[0]}"
    buttons.value = question.answer
    assert "✓ Dobrze." in verdict.value and html.escape(question.why) in verdict.value
    assert "Right" not in verdict.value
    buttons.value = (question.answer + 1) % len(question.choices)
    assert "✗ Niezupełnie: poprawna odpowiedź to „" in verdict.value and "Not quite" not in verdict.value


def fake_package(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """quiz.py reading its quizzes from `folder` instead of the package."""
    monkeypatch.setattr(quiz_module, "resources", types.SimpleNamespace(files=lambda package: folder))


def test_a_quiz_not_translated_yet_is_asked_in_english_with_polish_words(
    polish: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "quizzes" / "pl").mkdir(parents=True)
    entry = {"question": "Is this English?", "choices": ["Yes", "No", "Maybe"], "answer": 0, "why": "It is, still."}
    (tmp_path / "quizzes" / "new.json").write_text(json.dumps([entry]), encoding="utf-8")
    fake_package(monkeypatch, tmp_path)
    shown = quiz("new")
    assert shown.questions == [Question("Is this English?", ("Yes", "No", "Maybe"), 0, "It is, still.")]
    assert shown._snapshot_text().startswith("Sprawdź się, 1 pytanie: ")
    assert shown.verdict(1, 1) == "✗ Niezupełnie: poprawna odpowiedź to „Yes”. It is, still."
    twin = dict(entry, question="Czy to po polsku?", choices=["Tak", "Nie", "Może"], why="Tak, już po polsku.")
    (tmp_path / "quizzes" / "pl" / "new.json").write_text(json.dumps([twin]), encoding="utf-8")
    assert quiz("new").questions[0].text == "Czy to po polsku?"
    i18n.set_language("en")
    assert quiz("new").questions[0].text == "Is this English?"
    assert names() == ["new"]  # the pl folder is not a quiz


# -- English, unchanged ------------------------------------------------------------------------------------------------


def saved_quiz_output(name: str) -> dict[str, str]:
    """What the English notebook `name` saved for its quiz(...) cell."""
    cells = raw(ROOT / "notebooks" / f"{name}.ipynb")["cells"]
    cell = next(c for c in cells if c["cell_type"] == "code" and f'quiz("{name}")' in "".join(c["source"]))
    data = next(output["data"] for output in cell["outputs"] if output["output_type"] == "execute_result")
    return {kind: "".join(data[kind]) for kind in ("text/plain", "text/html")}


@pytest.mark.parametrize("name", names())
def test_the_english_quiz_is_what_the_english_notebook_saved(name: str) -> None:
    saved = quiz(name)._repr_mimebundle_()
    assert {kind: saved[kind] for kind in ("text/plain", "text/html")} == saved_quiz_output(name)


def test_the_english_words_are_unchanged() -> None:
    shown = quiz("04_budgets")
    question = shown.questions[0]
    assert shown.verdict(1, question.answer) == f"✓ Right. {question.why}"
    wrong = (question.answer + 1) % len(question.choices)
    right = question.choices[question.answer]
    assert shown.verdict(1, wrong) == f"✗ Not quite: the answer is “{right}”. {question.why}"
    assert shown._snapshot_text().startswith(
        "Self-check, 4 questions: run this cell to answer; each answer is checked."
    )
    shown.questions = shown.questions[:1]
    assert shown._snapshot_text().startswith("Self-check, 1 question: run this cell to answer; each answer is checked.")
    widget = quiz("04_budgets")._widget().children[0]
    widget.children[1].value = question.answer
    assert "✓ Right." in widget.children[2].value


# -- the catalog ---------------------------------------------------------------------------------------------------


def catalog_entries() -> list[dict[str, Any]]:
    """quiz.po's entries as written: comments, msgid, msgid_plural, msgstr forms (header included, msgid "")."""
    entries: list[dict[str, Any]] = []
    for block in re.split(r"\n\s*\n", CATALOG.read_text(encoding="utf-8").strip()):
        comments = [line for line in block.splitlines() if line.startswith("#")]
        parsed = i18n.read_po(block)
        plural = re.search(r'^msgid_plural (".*")$', block, re.M)
        for msgid, forms in parsed:
            entries.append(
                {"comments": comments, "msgid": msgid, "plural": plural and ast.literal_eval(plural[1]), "forms": forms}
            )
    return entries


def used_strings() -> dict[str, str | None]:
    """Every `_("...")` and `ngettext("...", "...", n)` literal of SOURCES: msgid -> its plural (None for `_`)."""
    found: dict[str, str | None] = {}
    for source in SOURCES:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("_", "ngettext") or not node.args:
                continue
            first = node.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(node)
            plural = None
            if node.func.id == "ngettext":
                second = node.args[1]
                assert isinstance(second, ast.Constant) and isinstance(second.value, str), ast.unparse(node)
                plural = second.value
            found[first.value] = plural
    return found


def test_the_catalog_has_a_polish_header() -> None:
    header = next(entry for entry in catalog_entries() if entry["msgid"] == "")["forms"][0]
    assert "Content-Type: text/plain; charset=UTF-8\n" in header
    assert "Language: pl\n" in header
    assert (
        "Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\n"
        in header
    )


def test_every_string_quiz_py_shows_is_in_the_catalog_and_every_entry_is_used() -> None:
    used = used_strings()
    assert len(used) >= 4, "the AST walk found too few strings"
    entries = {entry["msgid"]: entry for entry in catalog_entries() if entry["msgid"]}
    assert sorted(set(used) - set(entries)) == [], "shown but not translated"
    assert sorted(set(entries) - set(used)) == [], "stale entries"
    for msgid, plural in used.items():
        entry = entries[msgid]
        assert entry["plural"] == plural, msgid
        assert len(entry["forms"]) == (3 if plural else 1), msgid
        assert all(entry["forms"]), msgid
        assert i18n.catalog("pl")[msgid] == entry["forms"], f"agentlab.i18n reads {msgid!r} otherwise"


def edges(text: str) -> tuple[str, str]:
    """What a text starts and ends with that is not a word: whitespace, symbols, punctuation, a placeholder's brace."""
    return re.match(r"^\W*", text)[0], re.search(r"\W*$", text)[0]


def test_each_translation_keeps_its_placeholders_edges_and_symbols() -> None:
    for entry in catalog_entries():
        if not entry["msgid"]:
            continue
        originals = [entry["msgid"]] + ([entry["plural"]] if entry["plural"] else [])
        for form in entry["forms"]:
            for original in originals:
                assert sorted(PLACEHOLDER.findall(form)) == sorted(PLACEHOLDER.findall(original)), form
                assert edges(form) == edges(original), form
                assert [c for c in form if c in SYMBOLS] == [c for c in original if c in SYMBOLS], form
        assert any(line.startswith("#: ") and "agentlab/lab/quiz.py" in line for line in entry["comments"]), entry


def test_no_msgid_of_quiz_po_is_in_another_catalog() -> None:
    mine = {entry["msgid"] for entry in catalog_entries() if entry["msgid"]}
    for other in sorted(CATALOG.parent.glob("*.po")):
        if other != CATALOG:
            theirs = {msgid for msgid, _forms in i18n.read_po(other.read_text(encoding="utf-8")) if msgid}
            assert mine & theirs == set(), other.name
