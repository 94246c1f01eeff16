"""What a learner reads, in English or Polish: `_("text")` and `ngettext(one, many, n)`, with catalogs in the package.

    from agentlab.i18n import _, ngettext
    _("turns")                                    # "kroki" when the language is pl
    ngettext("{n} call", "{n} calls", 5).format(n=5)   # "5 wywołań": Polish has three plural forms

The language, first that says one: `set_language("pl")` (what `agentlab check --lang pl` calls), the environment
variable AGENTLAB_LANG, a file named `agentlab-lang` in the working directory (notebooks/pl/ has one: a kernel
runs in its notebook's folder, in JupyterLab, nbval and the browser edition alike, so the Polish notebooks need no
code cell of their own to say it), else English. The language is looked up at each call, so a learner who sets
AGENTLAB_LANG mid-session sees it in the next run.

Catalogs are gettext `.po` files in agentlab/locale/<lang>/ (one per part of the package: lab.po, classroom.po,
...). They are read as `.po`, not compiled `.mo`: the standard library's gettext reads only `.mo`, which would
need a build step (msgfmt is not in the standard library) and a binary file in the repository; a `.po` is text a
translator edits and a test checks. The reader takes the subset this package writes: msgid, msgid_plural,
msgstr, msgstr[n], comments, multi-line strings; no msgctxt. Error messages are not translated here: their
contract phrases ("unknown tool", "tool budget", ...) stay English, as the Polish exercise keeps them.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

LOCALE = Path(__file__).resolve().parent / "locale"
LANGUAGES = ("en", "pl")
MARKER = "agentlab-lang"
_chosen: str | None = None


def set_language(language: str | None) -> None:
    """Choose the language for this process (None: back to the environment and the working directory)."""
    global _chosen
    if language is not None and language not in LANGUAGES:
        from agentlab.errors import ConfigError

        raise ConfigError(f"the language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    _chosen = language


def language() -> str:
    """The language in force: set_language, then AGENTLAB_LANG, then an `agentlab-lang` file here, then en."""
    if _chosen is not None:
        return _chosen
    wanted = os.environ.get("AGENTLAB_LANG", "").strip().lower()
    if not wanted:
        wanted = _marker(os.getcwd())
    wanted = wanted.split("_")[0].split(".")[0]  # pl_PL.UTF-8 is pl
    return wanted if wanted in LANGUAGES else "en"


@functools.lru_cache(maxsize=16)
def _marker(folder: str) -> str:
    try:
        return (Path(folder) / MARKER).read_text(encoding="utf-8").strip().lower()
    except OSError:
        return ""


def _(text: str) -> str:
    """`text` in the language in force (as it is, if the catalog has no translation of it)."""
    if language() == "en":
        return text
    found = catalog(language()).get(text)
    return found[0] if found and found[0] else text


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of `singular`/`plural` that goes with the number `n`, in the language in force."""
    if language() == "en":
        return singular if n == 1 else plural
    found = catalog(language()).get(singular)
    if not found or len(found) < 3 or not all(found):
        return singular if n == 1 else plural
    return found[polish_form(n)]


def polish_form(n: int) -> int:
    """Polish plural forms: 1 wywołanie, 2-4 wywołania (not 12-14), else wywołań (the gettext rule for pl)."""
    n = abs(n)
    if n == 1:
        return 0
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return 1
    return 2


@functools.cache
def catalog(language: str) -> dict[str, list[str]]:
    """Every msgid of the language's catalogs -> its msgstr forms (one, or three for a Polish plural)."""
    entries: dict[str, list[str]] = {}
    for path in sorted((LOCALE / language).glob("*.po")):
        for msgid, forms in read_po(path.read_text(encoding="utf-8")):
            if msgid:  # the header entry has an empty msgid
                entries[msgid] = forms
    return entries


def read_po(text: str) -> list[tuple[str, list[str]]]:
    """The (msgid, [msgstr forms]) entries of a .po file's text, in order."""
    entries: list[tuple[str, list[str]]] = []
    fields: dict[str, str] = {}
    current = None

    def flush() -> None:
        if "msgid" in fields:
            forms = [fields[key] for key in sorted(fields) if key.startswith("msgstr")]
            entries.append((fields["msgid"], forms))
        fields.clear()

    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            fields[current] += ast.literal_eval(line)
            continue
        key, _space, value = line.partition(" ")
        if key == "msgid":
            flush()
        current = key
        fields[key] = ast.literal_eval(value)
    flush()
    return entries
