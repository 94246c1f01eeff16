"""The live views in Polish: playground, trace, approval desk, a write's before/after, the cheat sheet.

With the language set to pl, each view is driven the way a learner drives it (a playground made and its controls
moved, a desk answered, a trace shown) and its words must be Polish, while the settings keys, the scenario keys
and the loop's error messages (their contract phrases) stay English. With en, nothing changes. The catalog
(agentlab/locale/pl/lab.po) is checked against the code: every msgid the files use has an entry, every entry is
used, and each translation keeps its placeholders, symbols and the glossary's terms.
"""

from __future__ import annotations

import ast
import asyncio
import html
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentlab import agent_loop, errors, i18n
from agentlab.errors import AbortError, AgentError, ToolBudgetError
from agentlab.lab import naive as naive_module
from agentlab.lab import trace, widgets
from agentlab.lab.cheatsheet import PROSE, RULES, cheatsheet
from agentlab.lab.examples import lookup_tools
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.lab.naive import Answer
from agentlab.lab.scenarios import SCENARIOS, get_scenario, run_scenario
from agentlab.lab.trace import GAUGE_NAMES, RETURNED, clip, explanation, render_html, render_text, write_outcome
from agentlab.lab.widgets import Playground, playground, render_view, status_line
from agentlab.tools import Approval, ToolCall
from agentlab.writes import approval
from agentlab.writes.approval import ApprovalDesk
from agentlab.writes.change_view import change_html
from agentlab.writes.store import Store

ROOT = Path(__file__).resolve().parents[1]
PO = ROOT / "agentlab" / "locale" / "pl" / "lab.po"
FILES = [
    ROOT / "agentlab" / "lab" / name
    for name in ("widgets.py", "trace.py", "scenarios.py", "_look.py", "naive.py", "cheatsheet.py")
] + [ROOT / "agentlab" / "writes" / name for name in ("approval.py", "card.py", "change_view.py")]
# Choices that are not the playground's words but names (the tutorial's boundary cases, from examples.py).
CODE_CHOICES = {"unknown-tool", "invalid-city", "same-call-twice"}
SYMBOLS = "✓✗→↺…–·?"


@pytest.fixture
def pl() -> Iterator[None]:
    i18n.set_language("pl")
    yield
    i18n.set_language(None)


@pytest.fixture
def en() -> Iterator[None]:
    i18n.set_language("en")
    yield
    i18n.set_language(None)


def said(msgid: str) -> str:
    """The Polish of `msgid`, read from the catalog file itself (not through `_`)."""
    return CATALOG[msgid][0]


def text_of(markup: str) -> str:
    """What a reader sees of some HTML: the tags dropped, the entities read."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def read_catalog() -> dict[str, list[str]]:
    return {msgid: forms for msgid, forms in i18n.read_po(PO.read_text(encoding="utf-8")) if msgid}


CATALOG = read_catalog()


# -- the catalog against the code ------------------------------------------------------------------------------------


def module_strings(tree: ast.Module) -> dict[str, str]:
    """A module's string constants by name (`NAME = "..."` and `A, B = "...", "..."`)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for name, value in zip(names, values, strict=False):
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found[name.id] = value.value
    return found


def used_msgids() -> tuple[set[str], set[str], list[str]]:
    """The msgids the files use: literal `_`/`ngettext` arguments, module constants passed to `_`, and the data
    (titles, labels, choices, ...) passed to `_` where shown. Also the plural msgids, and any argument of `_`
    this cannot read (which must be one of the data below)."""
    literal, plural, unread = set(), set(), []
    for path in FILES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = module_strings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            if node.func.id not in ("_", "ngettext"):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                literal.add(first.value)
                if node.func.id == "ngettext":
                    plural.add(first.value)
            elif isinstance(first, ast.Name) and first.id in constants:
                literal.add(constants[first.id])
            else:
                unread.append(f"{path.name}: {ast.unparse(first)}")
    data = {scenario.title for scenario in SCENARIOS.values()}
    for scenario in SCENARIOS.values():
        for knob in scenario.knobs:
            if knob.label != knob.name:
                data.add(knob.label)
            if not knob.verbatim:
                data |= set(knob.choices) - CODE_CHOICES
    data |= set(RETURNED.values()) | set(GAUGE_NAMES) | set(PROSE) | {rule.rule for rule in RULES}
    return literal | data, plural, unread


def test_every_msgid_the_files_use_has_an_entry_and_every_entry_is_used() -> None:
    used, plural, unread = used_msgids()
    # Each argument of `_` that is not a literal or a constant is one of the data the test gathers.
    assert sorted(unread) == sorted(
        [
            "widgets.py: scenario.title",
            "trace.py: g.name",
            "trace.py: gauge.name",
            "trace.py: RETURNED[step.kind]",
            "trace.py: RETURNED[step.kind]",
            "scenarios.py: self.choices[value]",
            "scenarios.py: self.label",
            "cheatsheet.py: text",
            "cheatsheet.py: r.rule",
        ]
    )
    assert sorted(used - set(CATALOG)) == [], "used in the code, missing from lab.po"
    assert sorted(set(CATALOG) - used) == [], "in lab.po, used nowhere (stale)"
    for msgid in plural:
        assert len(CATALOG[msgid]) == 3 and all(CATALOG[msgid]), f"{msgid!r} needs Polish's three plural forms"
    assert all(len(forms) == 1 for msgid, forms in CATALOG.items() if msgid not in plural)


def test_the_catalog_has_its_header_and_names_each_entry_s_file() -> None:
    text = PO.read_text(encoding="utf-8")
    header = dict(i18n.read_po(text))[""][0]
    assert "Content-Type: text/plain; charset=UTF-8\n" in header and "Language: pl\n" in header
    assert "Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\n" in (
        header
    )
    entries = text.split("\n\n")[1:]
    assert len([entry for entry in entries if "msgid " in entry]) == len(CATALOG)
    for entry in entries:
        if "msgid " in entry:
            assert re.search(r"^#: agentlab/\S+\.py", entry, re.M), entry


def test_each_translation_keeps_its_placeholders_spaces_and_symbols() -> None:
    for msgid, forms in CATALOG.items():
        for msgstr in forms:
            assert sorted(re.findall(r"\{(\w*)\}", msgstr)) == sorted(re.findall(r"\{(\w*)\}", msgid)), msgid
            assert msgstr != "" and msgstr.strip() == msgstr.strip(" ")
            assert msgstr[: len(msgstr) - len(msgstr.lstrip())] == msgid[: len(msgid) - len(msgid.lstrip())], msgid
            assert msgstr[len(msgstr.rstrip()) :] == msgid[len(msgid.rstrip()) :], msgid
            assert sorted(c for c in msgstr if c in SYMBOLS) == sorted(c for c in msgid if c in SYMBOLS), msgid
            if msgid.lstrip()[:1] in SYMBOLS:
                assert msgstr.lstrip()[:1] == msgid.lstrip()[:1], msgid


def test_no_msgid_is_in_another_catalog_and_the_glossary_s_not_forms_are_never_used() -> None:
    for other in PO.parent.glob("*.po"):
        if other != PO:
            theirs = {msgid for msgid, _ in i18n.read_po(other.read_text(encoding="utf-8")) if msgid}
            assert not theirs & set(CATALOG), f"{other.name} has msgids of lab.po"
    glossary = (ROOT / "docs" / "pl" / "glossary.md").read_text(encoding="utf-8")
    banned = [
        form.strip()
        for row in re.findall(r"^\|(.*)\|$", glossary, re.M)[2:]
        for form in row.split("|")[2].split(",")
        if form.strip()
    ]
    assert "tura" in banned and "ślad" in banned  # the table was read
    polish = " ".join(form for forms in CATALOG.values() for form in forms)
    for form in banned:
        assert not re.search(rf"(?<!\w){re.escape(form)}", polish, re.I), form


# -- the playground ---------------------------------------------------------------------------------------------------


def test_a_playground_in_polish_keeps_its_settings_keys_and_the_error_s_contract(pl) -> None:
    pg = playground("budgets", max_calls=5)
    try:
        # The error's line: the English message as the loop raised it, then one Polish sentence.
        first, second = pg.status.split("\n")
        assert first.startswith("✗ ToolBudgetError: tool budget exhausted: the model asked for 2 tool calls")
        assert second == said("The model asked for more calls than max_calls allows; nothing of this batch ran.")
        view = text_of(pg.view.value)
        assert "piaskownica · budgets · Budżet wywołań i budżet kroków" in view
        assert "max_turns=4 · max_calls=5 · timeout_ms=2000 · max_chars=4000 · calls_per_turn=2" in view
        for polish in ("użytkownik", "krok 1", "krok 3", "odmówiono", "— nic się nie wykonało", "✗ tutaj"):
            assert polish in view, polish
        assert "✗ zatrzymane w kroku 3, odmawiając przyjęcia propozycji modelu" in view
        assert "kroki: 3 / 4" in view and "wywołania: 4 / 5 (+2 z odmową) ✗" in view and "znaki: " in view
        assert re.search(r"czas: \d+ ms z 2000 ms", view)
        # The controls: a limit keeps its name, a knob's label is Polish, and so are the buttons and captions.
        assert pg.controls["max_calls"].description == "max_calls"
        assert pg.controls["calls_per_turn"].description == "wywołania na krok"
        assert pg.controls["turns_before_answer"].description == "kroki przed odpowiedzią"
        assert pg.stop.description == "Stop" and pg.stop.tooltip == said(
            "abort the run in flight through its abort signal"
        )
        captions = [column.children[0].value for column in pg.box.children[-2].children]
        assert captions == ["<b>limity pętli</b>", "<b>scenariusz</b>"]
        bundle = pg._repr_mimebundle_()
        assert bundle["text/plain"].startswith(said(widgets.SNAPSHOT) + "\npiaskownica budgets: max_turns=4")
        assert said(widgets.SNAPSHOT) in text_of(bundle["text/html"])
    finally:
        pg.close()


async def test_a_playground_s_choices_are_polish_except_those_that_are_code(pl) -> None:
    pg = playground("tool_args")
    try:
        assert pg.controls["args"].description == "proponowane argumenty"
        assert [label for label, _ in pg.controls["args"].options][:3] == [
            '{"id": "A"} (poprawne)',
            '{"id": 7} (liczba)',
            "{} (bez id)",
        ]
        assert 'args={"id": 7} (liczba)' in text_of(pg.view.value)
        pg.controls["args"].value = 0  # what choosing the first option does
        await pg.settled()
        assert pg.status == "✓ odpowiedź: A: The Pragmatic Programmer (on the shelf)"  # the model's words are data
    finally:
        pg.close()
    names = playground("tool_names")
    try:
        assert [label for label, _ in names.controls["name"].options] == list(
            get_scenario("tool_names").knobs[0].choices
        )
        assert names.controls["name"].description == "proponowana nazwa narzędzia"
    finally:
        names.close()


ENGLISH_UI = r"\b(turn|turns|user|refused|stopped|here|final|answered|playground|used|within|calls|chars|time)\b"


def test_no_english_ui_word_is_left_in_a_polish_trace(pl) -> None:
    outcome = asyncio.run(run_scenario("tool_args"))  # {"id": 7}: refused, the run stops
    scenario = get_scenario("tool_args")
    view = render_view(scenario, scenario.defaults(), outcome)
    shown = text_of(view.replace(html.escape(str(outcome), quote=True), ""))  # all but the error's own message
    assert str(outcome).startswith("invalid args for lookup") and not re.findall(ENGLISH_UI, shown)
    text = render_text(outcome)
    assert not re.findall(ENGLISH_UI, text.replace(str(outcome), ""))
    english = trace._explanations()  # the language is pl: these are the Polish sentences
    assert f"    {english['ToolArgsError']}" in text.splitlines()
    assert english["ToolArgsError"] == said("The tool's validate did not accept the args; nothing of this batch ran.")


def test_every_error_class_has_its_own_polish_sentence_and_none_in_english() -> None:
    classes = [
        kind
        for kind in vars(errors).values()
        if isinstance(kind, type) and issubclass(kind, AgentError) and kind not in (AgentError, errors.BudgetError)
    ]
    assert len(classes) == 18
    i18n.set_language("pl")
    try:
        sentences = {kind.__name__: explanation(kind("x")) for kind in classes}
    finally:
        i18n.set_language(None)
    assert all(sentences.values()) and len(set(sentences.values())) == len(classes)
    assert sentences["ToolBudgetError"] == (
        "Model poprosił o więcej wywołań, niż pozwala max_calls; nic z tej partii się nie wykonało."
    )
    assert all(re.search("[ąćęłńóśźż]", sentence) for sentence in sentences.values())

    class MyToolError(errors.ToolError):
        pass

    i18n.set_language("pl")
    try:
        assert explanation(MyToolError("x")) == sentences["ToolError"]  # the nearest class's
        assert explanation(RuntimeError("x")) == ""
    finally:
        i18n.set_language(None)
    i18n.set_language("en")
    try:
        assert all(explanation(kind("x")) == "" for kind in classes)
    finally:
        i18n.set_language(None)


def test_stop_and_a_running_run_say_so_in_polish(pl) -> None:
    scenario = get_scenario("deadline")
    running = text_of(render_view(scenario, scenario.defaults(), None, running=True))
    assert "… trwa uruchomienie (Stop je przerywa)" in running
    assert status_line(None) == "jeszcze nie uruchomiono"
    stopped = status_line(AbortError(widgets.STOPPED))
    assert stopped.startswith("✗ AbortError: aborted: the Stop button was pressed\n")  # the reason stays English
    assert "sygnał przerwania" in stopped


async def test_the_naive_loop_s_toggle_and_lines_are_polish(pl, monkeypatch) -> None:
    async def naive_loop(question, model, tools, **limits):
        history = [{"role": "user", "content": question}]
        while True:
            decision = await model(history, None)
            if decision["kind"] == "final":
                return Answer(decision["text"], history)
            history.append({"role": "assistant", "calls": decision["calls"]})
            for c in decision["calls"]:
                history.append(
                    {"role": "tool", "call_id": c["id"], "content": str(await tools[c["name"]].run(c["args"]))}
                )

    pg = playground("budgets", naive=naive_loop, turns_before_answer=4)
    try:
        assert [label for label, _ in pg.loop.options] == ["pętla agentlab", "naiwna pętla"]
        assert "pętla agentlab · max_turns=4" in text_of(pg.view.value)
        pg.loop.value = True
        await pg.settled()
        assert pg.status.startswith("naiwna pętla odpowiedziała: done: 8 lookups in 4 turns")
        assert "naiwna pętla · max_turns=4" in text_of(pg.view.value)
    finally:
        pg.close()

    async def never_ends(question, model, tools, **limits):
        while True:
            await model([{"role": "user", "content": question}], None)

    monkeypatch.setattr(naive_module, "NAIVE_BOUND_S", 0.2)
    outcome = await run_scenario("budgets", naive=never_ends)
    assert status_line(outcome).startswith("✗ naiwna pętla zawiodła: naiwna pętla wciąż działała po 0.2 s;")
    assert "w kroku " in render_text(outcome) and "we własnym kodzie naiwnej pętli" in render_text(outcome)
    i18n.set_language("en")
    assert str(outcome).startswith("the naive loop was still running after 0.2 s; the playground gave up on it")
    assert outcome.where.endswith(", in the naive loop's own code")


def test_the_language_is_read_when_shown_not_when_made(monkeypatch, tmp_path) -> None:
    i18n.set_language(None)
    monkeypatch.delenv("AGENTLAB_LANG", raising=False)
    monkeypatch.chdir(tmp_path)
    pg = playground("weather")
    try:
        assert pg.status == "✓ answered: Pune: rain, 18°C"
        assert "playground · weather · The tutorial's weather agent" in text_of(pg._repr_mimebundle_()["text/html"])
        (tmp_path / "agentlab-lang").write_text("pl\n", encoding="utf-8")  # as notebooks/pl/ has
        i18n._marker.cache_clear()
        shown = text_of(pg._repr_mimebundle_()["text/html"])
        assert "piaskownica · weather · Agent pogodowy z samouczka i jego granice" in shown
        assert "case=model pokazowy" in shown
        monkeypatch.setenv("AGENTLAB_LANG", "en")
        assert "playground · weather" in pg._repr_mimebundle_()["text/html"]
    finally:
        pg.close()
        i18n._marker.cache_clear()


# -- the trace's other lines ---------------------------------------------------------------------------------------


def test_plural_forms_and_the_trace_s_small_words(pl) -> None:
    assert clip("x" * 161, 160).endswith("… (+1 znak)")
    assert clip("x" * 163, 160).endswith("… (+3 znaki)")
    assert clip("x" * 172, 160).endswith("… (+12 znaków)")
    assert clip("x" * 182, 160).endswith("… (+22 znaki)")
    assert write_outcome('{"denied":true,"reason":"no"}') == "✗ odrzucony: nic się nie wykonało"
    assert write_outcome('{"rolled_back":true}').startswith("↺ wycofany")
    assert write_outcome('{"outcome":"unknown"}').startswith("? wynik nieznany")
    run = SimpleNamespace(
        text="ok",
        history=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "ok", "usage": {"input_tokens": 3, "output_tokens": 4}},
        ],
    )
    assert render_text(run).splitlines() == [
        "✓ odpowiedź: ok",
        "  użytkownik q",
        "  krok 1   odpowiedź końcowa: ok  (tokeny: 3 na wejściu, 4 na wyjściu)",
    ]
    assert ">odpowiedź końcowa</span>: ok" in render_html(run) and "✓ odpowiedź: ok" in render_html(run)


async def test_refused_proposals_in_polish(pl) -> None:
    too_long = await run_scenario("limits", answer_size=1000)
    assert "odmówiono odpowiedzi końcowej (1000 znaków): Summary:" in render_text(too_long)
    assert "(nie została zwrócona)" in render_text(too_long)
    assert "odmówiono</span> odpowiedzi końcowej (1000 znaków)" in render_html(too_long)
    assert "znaki 512 / 800 (odpowiedź końcowa: 1000) ✗" in render_text(too_long)
    no_id = await run_scenario("recovery", max_refusals=0, slip=2)
    assert "(brak identyfikatora)" in render_text(no_id)
    given_back = await run_scenario("recovery")
    shown = render_text(given_back)
    assert "✗ odmowa, wraca do modelu — unknown tool 'Lookup'" in shown  # the refusal's words stay English
    assert "odmowy 1 / 1" in shown
    assert "✗ odmowa, wraca do modelu</span>" in render_html(given_back)
    shown_gauges = {gauge.name for run in (too_long, no_id, given_back) for gauge in trace.gauges(run)}
    assert shown_gauges <= set(GAUGE_NAMES) and {"turns", "calls", "chars", "time", "refusals"} <= shown_gauges
    model = Scripted(calls(call("lookup", {"id": "A"}, "c1"), call("lookup", {"id": "B"}, "c2")))
    with pytest.raises(ToolBudgetError) as caught:
        await agent_loop("q", model, lookup_tools(), max_calls=1)
    assert "odmówiono wywołania c1: lookup" in render_text(caught.value)
    assert "wywołania 0 / 1 (+2 z odmową) ✗" in render_text(caught.value)


# -- the approval desk and a write's before/after --------------------------------------------------------------------

RESERVE = {"book": "C", "customer": "eve", "quantity": 1}


async def test_the_approval_desk_in_polish(pl, tmp_path) -> None:
    store = Store(tmp_path / "shop.db")
    desk = ApprovalDesk(store, script=[True, Approval(False, "jeden na klienta")])
    model = Scripted(calls(call("reserve", RESERVE, "w1")), calls(call("reserve", RESERVE, "w2")), final("ok"))
    await agent_loop("q", model, store.tools(), approve=desk)
    card = desk.cards[0]
    assert (card.approve.description, card.deny.description) == ("Zatwierdź", "Odrzuć")
    assert card.reason.placeholder == "powód odrzucenia (model go przeczyta)"
    assert [card.verdict for card in desk.cards] == ["✓ zatwierdzony", "✗ odrzucony: jeden na klienta"]
    assert str(desk).splitlines() == [
        "stanowisko zatwierdzania: 2 proponowane zapisy",
        '  reserve {"book": "C", "customer": "eve", "quantity": 1} (wywołanie w1): ✓ zatwierdzony',
        '  reserve {"book": "C", "customer": "eve", "quantity": 1} (wywołanie w2): ✗ odrzucony: jeden na klienta',
    ]
    shown = text_of(desk._repr_mimebundle_()["text/html"])
    assert said(approval._TITLE) in shown and said(approval._TITLE) in desk.box.children[0].value
    for polish in ("wywołanie w1", "nowy wiersz", "przed", "po", "(brak wiersza)", "narzędzie zwróciłoby"):
        assert polish in shown, polish
    assert not re.findall(r"\b(call|before|after|new row|approved|denied|the tool would return)\b", shown)


def test_a_waiting_desk_s_snapshot_and_a_run_that_stops_without_an_answer(pl, tmp_path) -> None:
    store = Store(tmp_path / "shop.db")
    desk = ApprovalDesk(store)
    done = desk.start("q", Scripted(calls(call("reserve", RESERVE, "w1")), final("ok")), store.tools(), timeout_ms=300)
    assert desk.cards[0].verdict == "… czeka na Zatwierdź albo Odrzuć"
    saved = desk._repr_mimebundle_()
    assert said(approval.UNANSWERED) in saved["text/plain"] and said(approval.UNANSWERED) in saved["text/html"]
    assert said(approval.WAITING) not in saved["text/html"]
    outcome = done.result(timeout=5)
    assert isinstance(outcome, errors.DeadlineError)
    assert desk.cards[0].verdict == said(approval.EXPIRED)
    assert desk.cards[0].approve.disabled
    assert "zatrzymane" in text_of(desk._repr_mimebundle_()["text/html"])


def test_a_write_that_would_replay_or_change_nothing_says_so_in_polish(pl, tmp_path) -> None:
    store = Store(tmp_path / "shop.db")
    asyncio.run(
        agent_loop(
            "q",
            Scripted(calls(call("reserve", RESERVE, "w1")), final("ok")),
            store.tools(key=lambda c: "order-1"),
            approve=lambda c: True,
        )
    )
    again = change_html(store.preview(ToolCall("w9", "reserve", RESERVE), key=lambda c: "order-1"))
    assert "Jego klucz idempotencji &#x27;order-1&#x27; był już użyty" in again
    too_many = change_html(store.preview(ToolCall("w10", "reserve", {**RESERVE, "quantity": 9})))
    assert "Niczego by nie zmienił." in too_many and "wywołanie w10" in too_many


# -- the cheat sheet ---------------------------------------------------------------------------------------------------


def test_the_cheat_sheet_in_polish_keeps_classes_and_phrases(pl) -> None:
    sheet = cheatsheet()
    text, markup = sheet.text(), sheet.html()
    assert text.startswith("wynik wraca powiązany z identyfikatorem wywołania\n    — · fraza - · 01_call_ids")
    assert "nazwa jest dokładnie kluczem tools\n    UnknownToolError · fraza unknown tool · 02_tool_names" in text
    assert "ApprovalError (albo odrzucenie) · fraza approval required" in text
    assert "jego własny powód · fraza (wywołującego)" in text
    assert all(f">{name}</th>" in markup for name in ("reguła", "błąd", "fraza", "notatnik", "w loop.py"))


# -- English: unchanged ------------------------------------------------------------------------------------------------


async def test_english_is_as_it_was(en) -> None:
    assert status_line(None) == "not run yet"
    assert status_line(AbortError(widgets.STOPPED)) == "✗ AbortError: aborted: the Stop button was pressed"
    assert clip("x" * 163, 160).endswith("… (+3 chars)")
    too_long = await run_scenario("limits", answer_size=1000)
    text = render_text(too_long)
    assert "  turn 2   refused final answer (1000 chars): Summary:" in text
    assert (
        "(not returned)" in text and "  used: turns 2 / 6 · calls 1 / 8 · chars 512 / 800 (final text 1000) ✗" in text
    )
    assert "<span class='mark' style='color:#e5534b;font-weight:bold'>refused</span> final answer (1000 chars)" in (
        render_html(too_long)
    )
    for key, scenario in SCENARIOS.items():
        if key in ("real_model", "whole_or_nothing"):  # loopback servers and a card service's second: below
            continue
        outcome = await run_scenario(key)
        view = render_view(scenario, scenario.defaults(), outcome)
        assert f"playground · {key} · {html.escape(scenario.title)}</div>" in view
        assert not re.search("[ąćęłńóśźżĄĆĘŁŃÓŚŹŻ]", view + render_text(outcome) + status_line(outcome)), key


def test_an_english_desk_and_playground_are_as_they_were(en, tmp_path) -> None:
    store = Store(tmp_path / "shop.db")
    desk = ApprovalDesk(store, script=[Approval(False, "")])
    asyncio.run(
        agent_loop("q", Scripted(calls(call("reserve", RESERVE, "w1")), final("ok")), store.tools(), approve=desk)
    )
    assert (desk.cards[0].approve.description, desk.cards[0].verdict) == ("Approve", "✗ denied")
    assert str(desk).startswith("approval desk: 1 proposed write\n  reserve")
    pg = playground("whole_or_nothing", deposit=2, timeout_ms=3000)
    try:
        assert isinstance(pg, Playground) and pg.status.startswith("✓ answered: Eve: reservation")
        assert pg.controls["deposit"].options[2] == ("outbox, after the commit", 2)
        assert pg.controls["card_service"].description == "the card service"
        assert "deposit=outbox, after the commit · card_service=takes the deposit" in pg.view.value
        assert "\n" not in pg.status
    finally:
        pg.close()
