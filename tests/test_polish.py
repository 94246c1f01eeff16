"""The Polish edition cannot drift: each Polish notebook is its English twin's translation (same code, same cells,
stamped with the English source's hash), the glossary's terms are the ones used, the catalogs keep their
placeholders, and the language is chosen the way agentlab/i18n.py says."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from agentlab import i18n
from agentlab.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import translations  # noqa: E402  (tools/ is not a package)

GLOSSARY = ROOT / "docs" / "pl" / "glossary.md"
PLACEHOLDER = re.compile(r"\{(\w*)[^{}]*\}")


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch):
    monkeypatch.delenv("AGENTLAB_LANG", raising=False)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


# -- the twins -------------------------------------------------------------------------------------------------------

TWINS = translations.twins()


def test_every_english_notebook_and_workbook_has_a_polish_twin() -> None:
    assert len(TWINS) >= 18 + 7 + 7
    missing = [polish for english, polish in TWINS if not polish.exists() or not english.exists()]
    assert missing == []


@pytest.mark.parametrize(("english", "polish"), TWINS, ids=[translations.shown(polish) for _, polish in TWINS])
def test_each_polish_notebook_is_its_english_twin_translated(english: Path, polish: Path) -> None:
    assert translations.problems(english, polish) == []


def pair(tmp_path: Path, name: str = "04_budgets.ipynb") -> tuple[Path, Path]:
    english, polish = tmp_path / "en.ipynb", tmp_path / "pl.ipynb"
    shutil.copy(ROOT / "notebooks" / name, english)
    shutil.copy(ROOT / "notebooks" / "pl" / name, polish)
    assert translations.problems(english, polish) == []
    return english, polish


def edit(path: Path, change) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    change(notebook)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False), encoding="utf-8")


def first(notebook: dict, kind: str) -> dict:
    return next(cell for cell in notebook["cells"] if cell["cell_type"] == kind)


def test_a_code_cell_that_differs_by_one_character_is_found(tmp_path: Path) -> None:
    english, polish = pair(tmp_path)
    edit(polish, lambda nb: first(nb, "code")["source"].append(" "))
    assert any("its code differs" in problem for problem in translations.problems(english, polish))


def test_an_english_edit_makes_the_translation_stale_until_it_is_stamped(tmp_path: Path) -> None:
    english, polish = pair(tmp_path)
    edit(english, lambda nb: first(nb, "markdown")["source"].append("\nOne more English sentence.\n"))
    assert any("the English source changed" in problem for problem in translations.problems(english, polish))


def test_a_rerun_of_the_english_notebook_leaves_the_translation_current(tmp_path: Path) -> None:
    english, polish = pair(tmp_path)
    edit(english, lambda nb: first(nb, "code").update(outputs=[], execution_count=None))
    assert translations.problems(english, polish) == []


def test_a_dropped_or_moved_cell_is_found(tmp_path: Path) -> None:
    english, polish = pair(tmp_path)
    edit(polish, lambda nb: nb["cells"].pop(1))
    assert any("cells, the English has" in problem for problem in translations.problems(english, polish))
    english, polish = pair(tmp_path)
    edit(polish, lambda nb: nb["cells"].insert(0, nb["cells"].pop(1)))
    assert translations.problems(english, polish) != []


def test_a_notebook_in_one_language_only_is_found(tmp_path: Path) -> None:
    english, polish = pair(tmp_path)
    polish.unlink()
    assert "has no Polish twin" in translations.problems(english, polish)[0]
    assert "no English source" in translations.problems(tmp_path / "gone.ipynb", english)[0]


# -- where each edition links to the other -----------------------------------------------------------------------------


def markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


def test_the_editions_link_to_each_other() -> None:
    assert "](pl/00_start_here.ipynb)" in markdown(ROOT / "notebooks" / "00_start_here.ipynb")
    assert "](../00_start_here.ipynb)" in markdown(ROOT / "notebooks" / "pl" / "00_start_here.ipynb")
    assert "notebooks/pl/00_start_here.ipynb" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("polish", [polish for _, polish in TWINS], ids=[translations.shown(p) for _, p in TWINS])
def test_every_relative_link_of_a_polish_notebook_leads_somewhere(polish: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", markdown(polish))
    broken = [link for link in links if "://" not in link and not (polish.parent / link).exists()]
    assert broken == []


# -- the glossary ------------------------------------------------------------------------------------------------------


def glossary() -> list[tuple[str, str, list[str]]]:
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| ([^|]*?) ?\|$", GLOSSARY.read_text(encoding="utf-8"), re.M)
    return [(en, pl, [form.strip() for form in avoid.split(",") if form.strip()]) for en, pl, avoid in rows[2:]]


def polish_text() -> str:
    """Everything a Polish learner reads that the package writes: notebooks, workbooks, catalogs, quizzes."""
    parts = [markdown(polish) for _, polish in TWINS if polish.exists()]
    for po in (ROOT / "agentlab" / "locale" / "pl").glob("*.po"):
        parts += ["\n".join(forms) for _, forms in i18n.read_po(po.read_text(encoding="utf-8"))]
    parts += [path.read_text(encoding="utf-8") for path in (ROOT / "agentlab" / "lab" / "quizzes" / "pl").glob("*")]
    return "\n".join(parts).lower()


def inflected(term: str) -> re.Pattern:
    """A term in any case form: each long word's last two letters may change (budżet wywołań, budżetu wywołań)."""
    words = [re.escape(word[:-2]) + r"\w*" if len(word) > 4 else re.escape(word) + r"\w*" for word in term.split()]
    return re.compile(r"\b" + r"\s+".join(words), re.I)


def test_the_glossary_has_the_issue_terms() -> None:
    terms = {pl for _, pl, _ in glossary()}
    assert {"budżet wywołań", "identyfikator wywołania", "termin"} <= terms
    assert len(terms) == len(glossary()), "one Polish term per English term"


def test_each_glossary_term_is_used_and_no_avoided_form_is() -> None:
    text = polish_text()
    unused = [pl for _, pl, _ in glossary() if not inflected(pl).search(text)]
    avoided = [
        f"{form} (say {pl})"
        for _, pl, forms in glossary()
        for form in forms
        if re.search(r"\b" + re.escape(form.lower()), text)
    ]
    assert unused == [], "glossary terms no Polish text uses"
    assert avoided == [], "forms the glossary rules out"


def test_an_avoided_form_would_be_found() -> None:
    """The check above is not vacuous: the avoided forms match the way they would be written."""
    sample = "model przekroczył budżet tur, a paczka wywołań poszła dalej"
    assert re.search(r"\b" + re.escape("budżet tur"), sample) and re.search(r"\bpaczka", sample)
    assert inflected("budżet wywołań").search("brak budżetu wywołań") is not None


# -- the catalogs ----------------------------------------------------------------------------------------------------

CATALOGS = sorted((ROOT / "agentlab" / "locale" / "pl").glob("*.po"))


def entries() -> list[tuple[str, str, list[str]]]:
    return [(po.name, msgid, forms) for po in CATALOGS for msgid, forms in i18n.read_po(po.read_text("utf-8")) if msgid]


def test_no_msgid_is_in_two_catalogs() -> None:
    seen: dict[str, str] = {}
    twice = []
    for name, msgid, _forms in entries():
        if msgid in seen:
            twice.append(f"{msgid!r} in {seen[msgid]} and {name}")
        seen[msgid] = name
    assert twice == []


def test_every_translation_keeps_its_placeholders_and_is_not_empty() -> None:
    """A singular keeps exactly the English placeholders; a plural form may drop {n} ("jedno"), never add one."""
    wrong = []
    for name, msgid, forms in entries():
        wanted = sorted(PLACEHOLDER.findall(msgid))
        for form in forms:
            found = sorted(PLACEHOLDER.findall(form))
            if not form or (found != wanted if len(forms) == 1 else not set(found) <= set(wanted)):
                wrong.append(f"{name}: {msgid!r} -> {form!r}")
    assert wrong == []


def test_every_catalog_declares_polish_and_its_plural_rule() -> None:
    for po in CATALOGS:
        header = dict(i18n.read_po(po.read_text("utf-8"))).get("", [""])[0]
        assert "Language: pl" in header and "nplurals=3" in header, po.name


# -- i18n itself -----------------------------------------------------------------------------------------------------


def test_read_po_takes_multiline_strings_escapes_and_plurals() -> None:
    text = r"""
# a comment
msgid ""
msgstr "Language: pl\n"

#: agentlab/lab/trace.py
msgid "turns: {used} / {limit}"
msgstr "kroki: {used} / {limit}"

msgid ""
"two "
"lines\n"
msgstr "dwie \"linie\"\n"

msgid "{n} call"
msgid_plural "{n} calls"
msgstr[0] "{n} wywołanie"
msgstr[1] "{n} wywołania"
msgstr[2] "{n} wywołań"
"""
    assert i18n.read_po(text) == [
        ("", ["Language: pl\n"]),
        ("turns: {used} / {limit}", ["kroki: {used} / {limit}"]),
        ("two lines\n", ['dwie "linie"\n']),
        ("{n} call", ["{n} wywołanie", "{n} wywołania", "{n} wywołań"]),
    ]


@pytest.mark.parametrize(
    ("n", "form"),
    [(0, 2), (1, 0), (2, 1), (4, 1), (5, 2), (11, 2), (12, 2), (14, 2), (21, 2), (22, 1), (25, 2), (102, 1), (112, 2)],
)
def test_polish_plural_forms(n: int, form: int) -> None:
    assert i18n.polish_form(n) == form


def test_the_language_comes_from_set_language_then_the_environment_then_the_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert i18n.language() == "en"
    marked = tmp_path / "pl"
    marked.mkdir()
    (marked / "agentlab-lang").write_text("pl\n")
    monkeypatch.chdir(marked)
    assert i18n.language() == "pl"  # a notebook in notebooks/pl/ needs no code cell to say it
    monkeypatch.setenv("AGENTLAB_LANG", "en")
    assert i18n.language() == "en"
    monkeypatch.setenv("AGENTLAB_LANG", "pl_PL.UTF-8")
    assert i18n.language() == "pl"
    i18n.set_language("en")
    assert i18n.language() == "en"
    monkeypatch.setenv("AGENTLAB_LANG", "xx")
    i18n.set_language(None)
    assert i18n.language() == "en"  # a language the package does not have: English, not an error


def test_an_unknown_language_asked_for_by_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="one of en, pl"):
        i18n.set_language("de")


def test_the_polish_folders_say_they_are_polish() -> None:
    for folder in ("notebooks/pl", "notebooks/pl/exercises", "teachers/source/pl/workbooks"):
        assert (ROOT / folder / "agentlab-lang").read_text().strip() == "pl"


def test_a_missing_translation_falls_back_to_the_english(monkeypatch) -> None:
    monkeypatch.setenv("AGENTLAB_LANG", "pl")
    assert i18n._("a sentence no catalog has") == "a sentence no catalog has"
    assert i18n.ngettext("{n} thing", "{n} things", 5) == "{n} things"


async def test_a_reference_check_says_its_verdict_in_polish(monkeypatch, capsys) -> None:
    """The notebooks' `await verify(...)` lines: the behaviour's title in the learner's language."""
    from agentlab import agent_loop
    from agentlab.behaviours import get, verify

    await verify("unknown_tool", agent_loop)
    english = capsys.readouterr().out
    monkeypatch.setenv("AGENTLAB_LANG", "pl")
    await verify("unknown_tool", agent_loop)
    polish = capsys.readouterr().out
    assert english.startswith(f"✓ {get('unknown_tool').title[:40]}")
    assert polish.startswith("✓ ") and polish != english and "narzędzi" in polish
