"""The learners' copies of the workbooks, made by nbgrader from the teachers' solved sources.

    python -m agentlab student            # teachers/source/workbooks/ -> notebooks/exercises/ (make student)
    python -m agentlab student --check    # exit 1 if a learner's copy is stale; write nothing

The layout is nbgrader's course convention, so a teacher who uses nbgrader takes `teachers/` as it is:

    teachers/nbgrader_config.py           the course (course_id "agentlab")
    teachers/source/workbooks/*.ipynb     the solved workbooks: solutions between ### BEGIN/END SOLUTION
    teachers/release/workbooks/*.ipynb    what `nbgrader generate_assignment workbooks` makes of them (not committed)
    notebooks/exercises/*.ipynb           the learners' copies: the release, where the learners work

`nbgrader generate_assignment` cuts each solution out (`# YOUR CODE HERE` / `raise NotImplementedError()`),
clears the outputs, locks the given and the check cells and records their checksums; this module only runs it
and copies the release where learners work. It never overwrites a learner's work: a copy is replaced only if it
is still exactly as it was released (`notebooks/exercises/.released.json` records what was), and an edited one
is kept, with a note saying where the new version is. nbgrader is the teachers' extra
(`pip install -e '.[teachers]'`); learners need neither it nor this command.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agentlab.errors import AgentError
from agentlab.i18n import _, ngettext

ROOT = Path(__file__).resolve().parents[2]  # the repository: teachers/ and notebooks/
COURSE = ROOT / "teachers"
ASSIGNMENT = "workbooks"
SOURCE = COURSE / "source" / ASSIGNMENT
RELEASE = COURSE / "release" / ASSIGNMENT
LEARNERS = ROOT / "notebooks" / "exercises"
# The Polish edition: its solved sources, released the same way into the Polish learners' folder.
EDITIONS = (
    (SOURCE, LEARNERS, RELEASE),
    (
        COURSE / "source" / "pl" / ASSIGNMENT,
        ROOT / "notebooks" / "pl" / "exercises",
        COURSE / "release" / "pl" / ASSIGNMENT,
    ),
)
MANIFEST = ".released.json"  # file name -> sha256 of the copy as released: tells an untouched copy from an edited one


class WorkbookError(AgentError):
    """The learners' copies cannot be made: nbgrader is missing or refused a source workbook."""


@dataclass
class Outcome:
    """What `write` did: copies written, copies already current, copies kept because a learner edited them, and
    release copies made."""

    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    released: list[Path] = field(default_factory=list)
    current: list[Path] = field(default_factory=list)

    def summary(self, root: Path = ROOT) -> str:
        """One line saying what was done, for `make student` (which printed nothing when all went well)."""

        def shown(path: Path) -> str:
            try:
                return str(path.relative_to(root))
            except ValueError:
                return str(path)

        learners = self.written + self.current + self.kept
        where = shown(learners[0].parent) if learners else shown(LEARNERS)
        release = _(" into {folder}/").format(folder=shown(self.released[0].parent)) if self.released else ""
        count = len(self.released) or len(learners)
        released = ngettext(
            "released {count} workbooks with nbgrader", "released {count} workbooks with nbgrader", count
        )
        tally = _("{written} written, {current} already up to date, {kept} kept for a learner's edits").format(
            written=len(self.written), current=len(self.current), kept=len(self.kept)
        )
        return f"{released.format(count=count)}{release}; {where}/: {tally}"


def generate(source_dir: Path = SOURCE, release_dir: Path | None = None) -> dict[str, str]:
    """File name -> text of nbgrader's release of every workbook in `source_dir`.

    nbgrader runs in a throwaway course folder (it keeps a gradebook database there); with `release_dir`, the
    release copies are also written there, and only there.
    """
    sources = sorted(source_dir.glob("*.ipynb"))
    if not sources:
        raise WorkbookError(f"no workbooks (*.ipynb) in {source_dir}")
    with tempfile.TemporaryDirectory(prefix="agentlab-course-") as folder:
        course = Path(folder)
        shutil.copytree(source_dir, course / "source" / ASSIGNMENT, ignore=shutil.ignore_patterns(".*"))
        shutil.copy(COURSE / "nbgrader_config.py", course / "nbgrader_config.py")
        _nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
        released = course / "release" / ASSIGNMENT
        versions = {path.name: (released / path.name).read_text(encoding="utf-8") for path in sources}
        if release_dir is not None:
            release_dir.mkdir(parents=True, exist_ok=True)
            for name, text in versions.items():
                (release_dir / name).write_text(text, encoding="utf-8")
    return versions


def _nbgrader(course: Path, *args: str) -> None:
    """Run one nbgrader command in `course`; a WorkbookError with nbgrader's own words if it fails."""
    try:
        import nbgrader  # noqa: F401  (only to say clearly that it is missing)
    except ImportError:
        raise WorkbookError(
            "the learners' copies are made by nbgrader, the teachers' extra: pip install -e '.[teachers]' "
            "(make student and make test install it)"
        ) from None
    # nbgrader runs alembic (its database migrations) by name: it must be on PATH, next to this Python.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line or "Error" in line]
        raise WorkbookError(f"nbgrader {' '.join(args)} failed: " + (" | ".join(errors[-4:]) or done.stderr[-800:]))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _manifest(learners: Path) -> dict[str, str]:
    path = learners / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise WorkbookError(f"cannot read {path}: {error}; delete it to start afresh") from error
    return {str(name): str(value) for name, value in data.items()} if isinstance(data, dict) else {}


def stale(source_dir: Path = SOURCE, learners: Path = LEARNERS) -> list[str]:
    """What is out of date in `learners`: missing, changed or extra copies (empty if none), in the language in force."""
    expected = generate(source_dir)
    problems = []
    for name, text in expected.items():
        path = learners / name
        if not path.exists():
            problems.append(_("{name}: missing").format(name=name))
        elif path.read_text(encoding="utf-8") != text:
            problems.append(_("{name}: out of date").format(name=name))
    extra = sorted(path.name for path in learners.glob("*.ipynb") if path.name not in expected)
    problems += [_("{name}: has no source workbook").format(name=name) for name in extra]
    if _manifest(learners) != {name: digest(text) for name, text in expected.items()}:
        problems.append(_("{name}: out of date").format(name=MANIFEST))
    return problems


def write(source_dir: Path = SOURCE, learners: Path = LEARNERS, release_dir: Path | None = RELEASE) -> Outcome:
    """Release every workbook (into `release_dir`), then bring the learners' copies up to date, keeping edits.

    A learner's copy is written if it is missing, or still exactly the copy last released to it; one that
    differs from both the last release and the new one has been edited, and is kept as it is.
    """
    versions = generate(source_dir, release_dir)
    outcome = Outcome(released=[release_dir / name for name in versions] if release_dir is not None else [])
    learners.mkdir(parents=True, exist_ok=True)
    manifest = {name: sha for name, sha in _manifest(learners).items() if name in versions}  # renamed: forgotten
    for name, text in versions.items():
        path = learners / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            manifest[name] = digest(text)
            outcome.current.append(path)
        elif current is None or digest(current) == manifest.get(name):
            path.write_text(text, encoding="utf-8")
            manifest[name] = digest(text)
            outcome.written.append(path)
        else:
            outcome.kept.append(path)
    (learners / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return outcome


def write_all() -> list[Outcome]:
    """`write` for every edition (English, Polish): what `agentlab student` does."""
    return [write(source, learners, release) for source, learners, release in EDITIONS]


def stale_all() -> list[str]:
    """`stale` for every edition, each problem naming its folder."""
    found = []
    for source, learners, _release in EDITIONS:
        folder = learners.relative_to(ROOT).as_posix()
        found += [f"{folder}/{problem}" for problem in stale(source, learners)]
    return found


__all__ = [
    "ASSIGNMENT",
    "COURSE",
    "EDITIONS",
    "LEARNERS",
    "RELEASE",
    "SOURCE",
    "Outcome",
    "WorkbookError",
    "stale",
    "stale_all",
    "write",
    "write_all",
]
