"""The Polish edition's twins: each translated notebook against its English source, so a translation cannot drift.

    .venv/bin/python tools/translations.py check                 # every twin; exit 1 on a problem
    .venv/bin/python tools/translations.py stamp notebooks/pl/01_call_ids.ipynb   # after bringing it in line

A Polish notebook has the English one's cells, in the same order, with the same ids, types and metadata; only the
text of markdown cells differs. Its code cells are the English code cells, character for character. Its metadata
records the hash of the English source it was translated from (`agentlab.translation.source_sha256`): the hash
covers every cell's type and source, not outputs, so re-running a notebook does not mark its translation stale,
but any edit of the English text or code does, until a translator brings the Polish twin in line and stamps it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# English folder -> Polish folder. The workbooks are translated in their nbgrader source (with the solutions), and
# released into notebooks/pl/exercises the way the English ones are released into notebooks/exercises.
PAIRS = {
    "notebooks": "notebooks/pl",
    "notebooks/exercises": "notebooks/pl/exercises",
    "teachers/source/workbooks": "teachers/source/pl/workbooks",
}
# nbgrader's release of a stamped source carries the source's stamp: its twin is held to the same cells and code,
# and its currency to `agentlab student` (tests/test_student.py), not to a stamp of its own.
RELEASED = {"notebooks/pl/exercises"}


def source_hash(notebook: dict) -> str:
    """The sha256 of a notebook's cell types and sources (outputs and execution counts left out)."""
    cells = [[cell["cell_type"], "".join(cell["source"])] for cell in notebook["cells"]]
    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()


def twins() -> list[tuple[Path, Path]]:
    """Every (English, Polish) pair of paths, whether or not both exist."""
    pairs = []
    for english, polish in PAIRS.items():
        names = {path.name for path in (ROOT / english).glob("*.ipynb")}
        names |= {path.name for path in (ROOT / polish).glob("*.ipynb")}
        pairs += [(ROOT / english / name, ROOT / polish / name) for name in sorted(names)]
    return pairs


def shown(path: Path) -> str:
    """A path as a message names it: from the repository's root when it is inside it."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def problems(english_path: Path, polish_path: Path) -> list[str]:
    """What keeps a Polish notebook from being its English twin's faithful translation (empty: none)."""
    name = shown(polish_path)
    if not english_path.exists():
        return [f"{name}: no English source {shown(english_path)}"]
    if not polish_path.exists():
        return [f"{name}: missing (the English {shown(english_path)} has no Polish twin)"]
    english, polish = read(english_path), read(polish_path)
    found = []
    if len(english["cells"]) != len(polish["cells"]):
        found.append(f"{name}: {len(polish['cells'])} cells, the English has {len(english['cells'])}")
    for number, (mine, theirs) in enumerate(zip(english["cells"], polish["cells"], strict=False), 1):
        where = f"{name}: cell {number}"
        if mine["cell_type"] != theirs["cell_type"] or mine.get("id") != theirs.get("id"):
            found.append(
                f"{where} is {theirs['cell_type']} {theirs.get('id')}, the English {mine['cell_type']} {mine.get('id')}"
            )
        elif mine["cell_type"] != "markdown" and "".join(mine["source"]) != "".join(theirs["source"]):
            found.append(f"{where}: its code differs from the English cell's")
        elif mine.get("metadata") != theirs.get("metadata"):
            found.append(f"{where}: its metadata differs from the English cell's")
    stamp = polish.get("metadata", {}).get("agentlab", {}).get("translation", {}).get("source_sha256")
    released = polish_path.parent.is_relative_to(ROOT) and shown(polish_path.parent) in RELEASED
    if not released and stamp != source_hash(english):
        found.append(
            f"{name}: the English source changed since it was translated (or it was never stamped): bring it in "
            f"line, then run: python tools/translations.py stamp {name}"
        )
    return found


def stamp(polish_path: Path) -> None:
    """Record the hash of the English source the Polish notebook now matches."""
    english_path = next(english for english, polish in twins() if polish == polish_path.resolve())
    polish = read(polish_path)
    translation = polish.setdefault("metadata", {}).setdefault("agentlab", {}).setdefault("translation", {})
    translation["source"] = english_path.relative_to(ROOT).as_posix()
    translation["source_sha256"] = source_hash(read(english_path))
    polish_path.write_text(json.dumps(polish, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check the Polish notebooks against their English sources.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check every twin, or the given Polish notebooks")
    check.add_argument("paths", nargs="*", type=Path)
    stamper = commands.add_parser("stamp", help="record that these Polish notebooks match their English sources")
    stamper.add_argument("paths", nargs="+", type=Path)
    options = parser.parse_args(argv)
    if options.command == "stamp":
        for path in options.paths:
            stamp(path)
        return 0
    wanted = {path.resolve() for path in options.paths}
    found = [
        text for english, polish in twins() if not wanted or polish in wanted for text in problems(english, polish)
    ]
    print("\n".join(found) or "every Polish notebook matches its English source")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
