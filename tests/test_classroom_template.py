"""The GitHub Classroom template: what `agentlab classroom init` writes, and its workflow run here as Actions runs it.

`python -m agentlab classroom init DIR` writes the starter repository: the learners' workbooks, a README for
students, and .github/workflows/classroom.yml, a command-grader step per row of each workbook (1 point each), then
the reporter. The slow test below runs that workflow's commands on this machine exactly as GitHub's runner would:
the command lines read from the YAML, in a fresh virtual environment that has nothing but what the setup command
installs (a wheel of this checkout, given to `init` as the requirement), each command by /bin/sh with only the
variables the command grader passes, its exit code deciding its step's max-score. It does this for a right, a
wrong and a cheating submission of the seven workbooks, and compares every workbook's points, row by row, with
what `agentlab grade` gives the same files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from agentlab import __version__
from agentlab.__main__ import main
from agentlab.behaviours import select
from agentlab.classroom import template
from agentlab.classroom.grading import grade_class, scope
from agentlab.classroom.student import LEARNERS, SOURCE

ROOT = Path(__file__).resolve().parent.parent
WORKBOOKS = sorted(path.name for path in LEARNERS.glob("*.ipynb"))
ROWS = {name: [b.key for b in select(scope(str(LEARNERS / name), None))] for name in WORKBOOKS}
# What the command grader (autograding-command-grader@v1) gives the command: these variables and no others.
GRADER_ENV = {"FORCE_COLOR": "true", "DOTNET_CLI_HOME": "/tmp", "DOTNET_NOLOGO": "true"}
GRADER_INPUTS = {"test-name", "setup-command", "command", "timeout", "max-score"}


def load_workflow(course: Path) -> dict:
    return yaml.safe_load((course / template.WORKFLOW).read_text(encoding="utf-8"))


def grader_steps(workflow: dict) -> list[dict]:
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    return [step for step in steps if step.get("uses") == template.GRADER]


# -- what init writes ---------------------------------------------------------------------------------------------


def test_init_writes_the_workbooks_a_readme_and_the_workflow(tmp_path, capsys) -> None:
    course = tmp_path / "course"
    assert main(["classroom", "init", str(course)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {course / template.WORKFLOW}" in out and "51 points in all" in out
    for name in WORKBOOKS:  # the learners' copies, byte for byte
        assert (course / name).read_bytes() == (LEARNERS / name).read_bytes()
    readme = (course / "README.md").read_text(encoding="utf-8")
    assert f"agentlab=={__version__}" in readme and "python -m agentlab check 01_basics.ipynb" in readme
    assert "51 in all" in readme and ".ipynb_checkpoints/" in (course / ".gitignore").read_text(encoding="utf-8")


def test_the_workflow_has_github_classrooms_shape(tmp_path) -> None:
    course = tmp_path / "course"
    template.init(course, "agentlab @ https://example.org/agentlab-0.1.0-py3-none-any.whl", python="3.13")
    workflow = load_workflow(course)
    assert workflow["name"] == "Autograding Tests"  # the names Classroom and the reporter look for
    assert set(workflow["on"]) >= {"push", "repository_dispatch"}
    assert workflow["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    job = workflow["jobs"]["run-autograding-tests"]
    assert job["runs-on"] == "ubuntu-latest" and "github-classroom[bot]" in job["if"]
    uses = [step["uses"] for step in job["steps"] if "uses" in step]
    assert all(use.rsplit("@", 1)[1][0] == "v" and use.rsplit("@", 1)[1][1:].isdigit() for use in uses), uses
    assert job["steps"][1]["with"] == {"python-version": "3.13"}
    graders = grader_steps(workflow)
    assert [step["id"] for step in graders] == [f"w{n[:2].lstrip('0')}_{key}" for n in WORKBOOKS for key in ROWS[n]]
    assert all(set(step["with"]) == GRADER_INPUTS and step["with"]["max-score"] == 1 for step in graders)
    assert len({step["with"]["test-name"] for step in graders}) == len(graders) == 51  # the reporter's identifiers
    setups = [step["with"]["setup-command"] for step in graders]
    assert "'agentlab @ https://example.org/agentlab-0.1.0-py3-none-any.whl'" in setups[0] and not any(setups[1:])
    commands = {step["with"]["command"] for step in graders}
    assert commands == {f"python -X utf8 -m agentlab classroom row {n} {key}" for n in WORKBOOKS for key in ROWS[n]}
    reporter = job["steps"][-1]
    assert reporter["uses"] == template.REPORTER
    ids = [step["id"] for step in graders]
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{ steps.{i}.outputs.result }}}}" for i in ids}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--requirement", " "], "give pip one requirement"),
        (["--python", "three"], "give a Python version"),
        (["--workbooks", "nowhere"], "no workbooks (*.ipynb) in nowhere"),
    ],
)
def test_init_refuses_what_it_cannot_write_in_one_line(tmp_path, capsys, argv, says) -> None:
    assert main(["classroom", "init", str(tmp_path / "course"), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and says in err, err


def test_init_never_writes_into_a_folder_with_something_in_it_unless_forced(tmp_path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["classroom", "init", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err and not (tmp_path / "README.md").exists()
    assert main(["classroom", "init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine" and (tmp_path / "README.md").exists()


def test_a_row_of_a_missing_workbook_fails_and_an_unknown_row_is_the_teachers_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["classroom", "row", "01_basics.ipynb", "history_shape"]) == 1
    err = capsys.readouterr().err
    assert "01_basics.ipynb: no such file" in err and "Put the workbook back" in err
    shutil.copy(LEARNERS / "02_shapes.ipynb", tmp_path)
    assert main(["classroom", "row", "02_shapes.ipynb", "history_shape"]) == 2
    assert "02_shapes.ipynb has no row 'history_shape' (its rows: malformed_decisions)" in capsys.readouterr().err


# -- the workflow run as GitHub's runner runs it ---------------------------------------------------------------------


def _sources_digest() -> str:
    digest = hashlib.sha256()
    sources = [*ROOT.glob("agentlab/**/*.py"), *ROOT.glob("agentlab/**/*.json"), *ROOT.glob("agentlab/**/*.po")]
    for path in sorted([*sources, ROOT / "pyproject.toml"]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="module")
def fresh_python() -> tuple[Path, Path]:
    """(a wheel of this checkout, a fresh venv's bin folder with nothing installed): kept in the temp folder, keyed
    by the package's sources, so that a second run takes a second, not a build."""
    cache = Path(tempfile.gettempdir()) / "agentlab-template-test" / _sources_digest()
    ready = cache / ".ready"
    if not ready.exists():
        shutil.rmtree(cache, ignore_errors=True)
        build = cache / "src"  # a copy, so that the build leaves nothing (build/, egg-info) in the working tree
        shutil.copytree(ROOT / "agentlab", build / "agentlab", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, build / name)
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
        subprocess.run([*pip, "wheel", "--no-deps", "-q", str(build), "-w", str(cache / "wheel")], check=True)
        subprocess.run([sys.executable, "-m", "venv", str(cache / "venv")], check=True)
        ready.touch()
    (wheel,) = (cache / "wheel").glob("agentlab-*.whl")
    return wheel, cache / "venv" / "bin"


def test_the_wheel_carries_the_polish_catalogs_and_quizzes(fresh_python) -> None:
    """An installed agentlab speaks Polish too: the .po catalogs and the Polish quizzes are package data."""
    wheel, _bin = fresh_python
    names = set(zipfile.ZipFile(wheel).namelist())
    catalogs = {f"agentlab/locale/pl/{path.name}" for path in (ROOT / "agentlab" / "locale" / "pl").glob("*.po")}
    quizzes = {f"agentlab/lab/quizzes/pl/{path.name}" for path in (ROOT / "agentlab/lab/quizzes/pl").glob("*.json")}
    assert catalogs and quizzes and catalogs | quizzes <= names


def right(name: str) -> dict:
    return json.loads((SOURCE / name).read_text(encoding="utf-8"))  # the teacher's solved workbook


def released(name: str) -> dict:
    return json.loads((LEARNERS / name).read_text(encoding="utf-8"))  # as handed out: nothing written yet


def edited(notebook: dict, old: str, new: str) -> dict:
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
    assert cells, f"no code cell holds {old!r}"
    for cell in cells:
        cell["source"] = "".join(cell["source"]).replace(old, new)
    return notebook


def with_cell(notebook: dict, source: str) -> dict:
    notebook["cells"].append(
        {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
    )
    return notebook


CHEATS = {  # a cell a student appends to get the points without writing the loop
    "01": "from agentlab import agent_loop  # agentlab's own loop\n",
    "02": "import agentlab.classroom.check as checker\nchecker.check = lambda *args, **kwargs: None\n",
    "03": "import os, sys\nprint('all 8 rows pass')\nsys.stdout.flush()\nos._exit(0)\n",
}
DELEGATE = "import importlib\nagent_loop = importlib.import_module('agentlab.loop').agent_loop\n"


def submission(kind: str, name: str) -> dict:
    """The right, the wrong or the cheating submission's copy of one workbook."""
    number = name[:2]
    if kind == "right":
        return right(name)
    if kind == "cheating":
        return with_cell(right(name), CHEATS.get(number, DELEGATE))
    if number == "01":  # json.dumps where compact_json belongs
        return edited(right(name), "return compact_json(result)", "return __import__('json').dumps(result)")
    if number == "03":
        return right(name)
    if number == "04":  # the turn budget off by one
        return edited(right(name), "if turns >= max_turns:", "if turns > max_turns:")
    return released(name)  # 02, 05, 06, 07: not done


def run_workflow(course: Path, bin_folder: Path, home: Path) -> dict[str, tuple[int, str]]:
    """Each grader step's command as the command grader runs it: step id -> (points, what it wrote to stderr)."""
    steps = grader_steps(load_workflow(course))
    env = {"PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home)}
    got = {}
    for step in steps:
        inputs = step["with"]
        done = subprocess.run(
            ["/bin/sh", "-c", inputs["command"]],
            cwd=course,
            env={**env, **GRADER_ENV},
            capture_output=True,
            text=True,
            timeout=float(inputs["timeout"]) * 60,
        )
        got[step["id"]] = (inputs["max-score"] if done.returncode == 0 else 0, done.stderr)
    return got


@pytest.mark.slow
def test_the_template_grades_each_workbook_as_agentlab_grade_does(tmp_path, fresh_python) -> None:
    wheel, bin_folder = fresh_python
    kinds = ("right", "wrong", "cheating")
    courses = {}
    for kind in kinds:
        course = courses[kind] = tmp_path / kind / "course"
        template.init(course, f"agentlab @ {wheel.as_uri()}")
        for name in WORKBOOKS:
            (course / name).write_text(json.dumps(submission(kind, name), indent=1), encoding="utf-8")
    # The setup command, once: the three courses share the fresh venv (on GitHub, each push gets a new machine).
    setup = grader_steps(load_workflow(courses["right"]))[0]["with"]["setup-command"]
    path = f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    subprocess.run(["/bin/sh", "-c", setup], env={"PATH": path, "HOME": str(tmp_path)}, check=True, capture_output=True)
    where = subprocess.run(
        [bin_folder / "python", "-c", "import agentlab; print(agentlab.__file__)"],
        cwd=tmp_path,
        env={"PATH": path, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert str(bin_folder.parent) in where.stdout, where  # the wheel's agentlab, not this checkout's

    def workflow_of(kind: str) -> dict[str, tuple[int, str]]:
        return run_workflow(courses[kind], bin_folder, tmp_path / kind / "home")

    def grade_of(kind: str) -> dict[str, dict[str, bool]]:
        graded = grade_class(courses[kind], tmp_path / kind / "grades", jobs=2)
        return {f"{g.student}.ipynb": {row.key: row.passed for row in g.report.rows} for g in graded}

    with ThreadPoolExecutor(2) as pool:
        runs = {kind: pool.submit(workflow_of, kind) for kind in kinds}
        grades = {kind: pool.submit(grade_of, kind) for kind in kinds}
        runs = {kind: future.result() for kind, future in runs.items()}
        grades = {kind: future.result() for kind, future in grades.items()}

    table = {}
    for kind in kinds:
        for name in WORKBOOKS:
            book = next(b for b in template.workbooks(courses[kind]) if b.name == name)
            ours = {key: runs[kind][template.step_id(book, key)][0] == 1 for key in ROWS[name]}
            assert ours == grades[kind][name], (
                f"{kind} {name}: the workflow {ours}, agentlab grade {grades[kind][name]}"
            )
            table[kind, name] = (sum(ours.values()), sum(grades[kind][name].values()), len(ROWS[name]))
    print("\n".join(f"{kind:9} {name:18} workflow {a}/{n}  grade {b}/{n}" for (kind, name), (a, b, n) in table.items()))
    assert all(table["right", name][0] == len(ROWS[name]) for name in WORKBOOKS)
    assert all(table["cheating", name][0] == 0 for name in WORKBOOKS)
    wrong = {name: table["wrong", name][0] for name in WORKBOOKS}
    assert 0 < wrong["01_basics.ipynb"] < 5 and wrong["03_checks.ipynb"] == 8 and 0 < wrong["04_budgets.ipynb"] < 3
    assert wrong["02_shapes.ipynb"] == wrong["05_deadline.ipynb"] == wrong["06_limits.ipynb"] == 0
    # What a student reads in a failed step's log: the row, what happened, and its hint.
    said = runs["wrong"]["w1_compact_json_results"][1]
    assert "✗ compact_json_results" in said and "hint" in said and "compact_json(result)" in said, said
    assert "agentlab's own loop" in runs["cheating"]["w1_history_shape"][1]
    assert "replaced" in runs["cheating"]["w2_malformed_decisions"][1]
    assert "the grading process ended" in runs["cheating"]["w3_unknown_tool"][1]
    assert runs["right"]["w6_abort_midway"] == (1, "")  # a passed row writes nothing to stderr
