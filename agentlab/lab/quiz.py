"""A notebook's self-check quiz: a few questions, each answer checked as the learner picks it.

    from agentlab.lab.quiz import quiz
    quiz("04_budgets")          # the questions of agentlab/lab/quizzes/04_budgets.json

The questions live beside this file, one JSON file per notebook, so a notebook's
code cell shows no answer. Each question has its choices, the index of the right
one, and `why`: the reason, shown once the learner has chosen, right or wrong. A
saved notebook shows the questions without their answers; running the cell gives
each question its buttons.

In Polish (agentlab.i18n: the language at call time) the questions come from
quizzes/pl/<the same name>.json, a translation with the same choices in the same
order and the same answers, and the quiz's own words from agentlab/locale/pl/quiz.po.
"""

from __future__ import annotations

import contextlib
import html
import json
import textwrap
from dataclasses import dataclass
from importlib import resources
from typing import Any

from agentlab.errors import ConfigError
from agentlab.i18n import _, language, ngettext
from agentlab.lab import _look as look

_FOLDER = "quizzes"


@dataclass(frozen=True)
class Question:
    """One question: its text, its choices, the index of the right choice, and why it is right."""

    text: str
    choices: tuple[str, ...]
    answer: int
    why: str

    def verdict(self, choice: int) -> str:
        """What the learner sees after picking `choice`: right or not, and why."""
        if not 0 <= choice < len(self.choices):
            raise ConfigError(f"choice {choice} is not one of 0..{len(self.choices) - 1}")
        if choice == self.answer:
            return _("✓ Right. {why}").format(why=self.why)
        return _("✗ Not quite: the answer is “{answer}”. {why}").format(answer=self.choices[self.answer], why=self.why)


def names() -> list[str]:
    """The notebooks that have a quiz."""
    folder = resources.files("agentlab.lab").joinpath(_FOLDER)
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def questions(notebook: str) -> list[Question]:
    """The questions of `notebook`'s quiz, in the language in force; a ConfigError names the quizzes if it has none."""
    folder = resources.files("agentlab.lab").joinpath(_FOLDER)
    source = folder.joinpath(f"{notebook}.json")
    if not source.is_file():
        raise ConfigError(f"no quiz for {notebook!r}; the quizzes are: {', '.join(names())}")
    asked_in = language()
    if asked_in != "en" and folder.joinpath(asked_in, f"{notebook}.json").is_file():  # else asked in English
        source = folder.joinpath(asked_in, f"{notebook}.json")
    loaded = json.loads(source.read_text(encoding="utf-8"))
    return [Question(entry["question"], tuple(entry["choices"]), entry["answer"], entry["why"]) for entry in loaded]


class Quiz:
    """The quiz of one notebook: `verdict(n, choice)` checks an answer; displayed, each question gets buttons."""

    def __init__(self, notebook: str) -> None:
        self.notebook = notebook
        self.questions = questions(notebook)

    def verdict(self, number: int, choice: int) -> str:
        """The verdict on `choice` (0-based) for question `number` (1-based, as shown)."""
        if not 1 <= number <= len(self.questions):
            raise ConfigError(f"question {number} is not one of 1..{len(self.questions)}")
        return self.questions[number - 1].verdict(choice)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The live buttons where widgets run, and the questions without answers for a saved notebook."""
        bundle: dict[str, Any] = {}
        with contextlib.suppress(ImportError):  # no ipywidgets: the questions still read, answers wait for it
            bundle.update(self._widget()._repr_mimebundle_(**kwargs) or {})
        bundle["text/html"] = self._snapshot_html()
        bundle["text/plain"] = self._snapshot_text()
        return bundle

    def _snapshot_text(self) -> str:
        count = len(self.questions)
        lines = [
            ngettext(
                "Self-check, {n} question: run this cell to answer; each answer is checked.",
                "Self-check, {n} questions: run this cell to answer; each answer is checked.",
                count,
            ).format(n=count)
        ]
        for number, question in enumerate(self.questions, 1):
            lines.extend(textwrap.wrap(f"{number}. {question.text}", 96, subsequent_indent="   "))
            for index, choice in enumerate(question.choices):
                lines.extend(
                    textwrap.wrap(f"{chr(97 + index)}) {choice}", 96, initial_indent="   ", subsequent_indent="      ")
                )
        return "\n".join(lines)

    def _snapshot_html(self) -> str:
        e = html.escape
        count = len(self.questions)
        header = ngettext(
            "Self-check, {n} question: run this cell to answer; each answer is checked as you choose it.",
            "Self-check, {n} questions: run this cell to answer; each answer is checked as you choose it.",
            count,
        ).format(n=count)
        parts = [
            f"<div class='agentlab-quiz'{look.attr(f'{look.SANS};max-width:60em;line-height:1.45')}>",
            f"<div{look.attr(look.MUTED)}>{e(header)}</div>",
        ]
        for number, question in enumerate(self.questions, 1):
            parts.append(f"<div{look.attr('margin-top:6px')}><b>{number}. {e(question.text)}</b></div><ol type='a'>")
            parts.extend(f"<li>{e(choice)}</li>" for choice in question.choices)
            parts.append("</ol>")
        return "".join(parts) + "</div>"

    def _widget(self) -> Any:
        import ipywidgets as widgets  # optional: only a live notebook needs it

        rows = []
        for number, question in enumerate(self.questions, 1):
            options = [(f"{chr(97 + index)}) {choice}", index) for index, choice in enumerate(question.choices)]
            buttons = widgets.RadioButtons(options=options, value=None, layout=widgets.Layout(width="auto"))
            verdict = widgets.HTML()

            def show(change: Any, number: int = number, verdict: Any = verdict) -> None:
                if change["new"] is None:
                    return
                text = self.verdict(number, change["new"])
                colour = look.GREEN if text.startswith("✓") else look.RED
                verdict.value = f"<div{look.attr(f'color:{colour};{look.SANS}')}>{html.escape(text)}</div>"

            buttons.observe(show, names="value")
            title = widgets.HTML(f"<b{look.attr(look.SANS)}>{number}. {html.escape(question.text)}</b>")
            rows.append(widgets.VBox([title, buttons, verdict]))
        return widgets.VBox(rows)


def quiz(notebook: str) -> Quiz:
    """The self-check quiz of `notebook` (its file name without `.ipynb`), to show in a cell."""
    return Quiz(notebook)


__all__ = ["Question", "Quiz", "names", "questions", "quiz"]
