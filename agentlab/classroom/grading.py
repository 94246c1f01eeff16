"""Grading that the graded code cannot change: each submission runs in a process of its own.

    report = grade("alice/solution.py")          # the same Report as check(), decided by this process
    python -m agentlab check alice/solution.py   # uses grade()
    python -m agentlab grade submissions/        # a whole class, in parallel: a CSV and a feedback file each

`agentlab.classroom.check.check` runs a student's code in the notebook's own process,
which is right for a learner's feedback and wrong for a grade: code that runs
in the checker's process can rewrite the checker. Here the submission is loaded
and the behaviours run in a child interpreter (`python -I`), with limits on its
CPU time, memory and output, in an empty temporary directory, in a session of
its own. The child sends what it observes, row by row, on a pipe it inherited
(never stdout, never its exit code), each line signed with a key it read from
stdin before any submitted code ran. This process builds the report from those
lines alone: a row the child never sent is a failed row, with the reason the
child stopped (killed for CPU, output or time, exited early, crashed).

Inside the child, before the submission loads: the scenarios' ids, names and
values are varied by a per-run seed; agentlab's own loop is replaced by a
tripwire, and an audit hook (which cannot be removed) watches for its code
being executed again from a copy; and a snapshot is taken of the checker's and
asyncio's functions and classes, compared after loading and after each row.
What this does not stop is written in docs/teachers.md ("What grading stops").

The child runs in this process's language (AGENTLAB_LANG is passed to it), so the rows it sends have their titles
and hints in it, as do the feedback files; grades.csv's column names stay English, for the programs that read it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agentlab.behaviours import EXTRA_STEPS, STEPS, select
from agentlab.classroom.check import BOUND_S, LOAD_BOUND_S, Report, Row, no_agent_loop, render_text, unloadable
from agentlab.errors import AgentError
from agentlab.i18n import _, language

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the agentlab package


@dataclass(frozen=True)
class Limits:
    """What one submission's process may use: CPU seconds, memory, output (stdout and stderr), time to load."""

    cpu_s: int = 120
    memory_mb: int = 2048
    output_mb: float = 1.0
    load_s: float = LOAD_BOUND_S


class GradingError(AgentError):
    """The submission could not be graded at all: a missing file, a folder, no agent_loop."""


@dataclass(frozen=True)
class Graded:
    """One submission's outcome: its report, and the reason it could not be loaded, if any."""

    student: str
    path: str
    report: Report
    problem: str = ""
    seconds: float = 0.0
    no_agent_loop: bool = False


# -- the parent: start the child, read its pipe, decide ------------------------------------------------------------


def scope(target: str, step: str | None) -> str | None:
    """The step a target is checked at: the given one; for a workbook, what its own check cells check."""
    if step is not None or not target.endswith(".ipynb"):
        return step
    try:
        notebook = json.loads(Path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    checks = [
        "".join(c.get("source", ""))
        for c in notebook.get("cells", [])
        if "check" in c.get("metadata", {}).get("tags", [])
    ]
    found = notebook.get("metadata", {}).get("agentlab", {}).get("step")
    if found in EXTRA_STEPS:
        return found  # a workbook past the exercise (7: writes) is graded on its own step
    if any(re.search(r"\bcheck\(\s*agent_loop\s*\)", source) for source in checks):
        return None  # the workbook's final cell checks everything
    return found if found in STEPS else None


def refuse_bad_target(target: str) -> None:
    """Raise GradingError with one clear line for a target that is not a readable file or an importable name."""
    path = Path(target)
    looks_like_a_path = os.sep in target or path.suffix in (".py", ".ipynb") or path.exists()
    if not looks_like_a_path:
        near = [f"{target}{suffix}" for suffix in (".py", ".ipynb") if Path(f"{target}{suffix}").is_file()]
        if near:  # `check nodeadline` for nodeadline.py: the child would import a module of that name, and fail
            raise GradingError(f"{target}: no such file; did you mean {' or '.join(near)}?")
        if not _importable(target):
            raise GradingError(f"{target}: no such file, and no module of that name to import")
        return  # a module name: the child imports it
    if not path.exists():
        near = _near_file(path)
        raise GradingError(f"{target}: no such file" + (f"; did you mean {near}?" if near else ""))
    if path.is_dir():
        raise GradingError(f"{target} is a folder; to grade every submission in it: python -m agentlab grade {target}")
    if path.suffix not in (".py", ".ipynb"):
        raise GradingError(f"{target}: not a .py file or a .ipynb workbook")
    try:
        with path.open("rb") as file:
            file.read(1)
    except OSError as error:
        raise GradingError(f"{target}: cannot be read ({error.strerror or error})") from None


def _importable(name: str) -> bool:
    """Whether the child (`python -I`, in an empty folder) can import `name`: its top package must be installed.

    Only the top package is looked up, so no code of the module runs here, in the grading process.
    """
    import importlib.machinery

    top = name.split(".")[0]
    if not top.isidentifier():
        return False
    if top in sys.builtin_module_names:
        return True
    here = {os.path.realpath(p) for p in ("", ".", os.getcwd())}
    search = [p for p in sys.path if os.path.realpath(p or ".") not in here]  # the child does not look in cwd
    search.append(str(ROOT))  # ...but does find agentlab, whose folder it puts first
    try:
        return importlib.machinery.PathFinder.find_spec(top, search) is not None
    except (ImportError, ValueError):
        return False


def _near_file(path: Path) -> str:
    """A file next to `path` that is most likely the one meant (another suffix, another case), or ""."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return ""
    stem, wanted = path.stem.lower(), path.name.lower()
    candidates = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".ipynb"))
    for candidate in candidates:
        if candidate.name.lower() == wanted or candidate.stem.lower() == stem:
            return str(candidate)
    return ""


def grade(
    target: str,
    step: str | None = None,
    *,
    seed: int | None = None,
    bound_s: float = BOUND_S,
    limits: Limits = Limits(),
    name: str | None = None,
) -> Graded:
    """Grade `target` (a .py file, a workbook or a module name) in a child process; the verdict is made here.

    `seed` varies the scenarios' ids, names and values (a fresh random one by default). Raises GradingError
    for a target that is not there, is a folder or cannot be read.
    """
    refuse_bad_target(target)
    step = scope(target, step)
    seed = secrets.randbelow(2**31) if seed is None else seed
    behaviours = select(step)
    key = secrets.token_bytes(32)
    wall_s = limits.load_s + len(behaviours) * (bound_s + 1.0) + 10.0
    started = time.perf_counter()
    lines, status = _run_child(target, step, seed, bound_s, limits, key, wall_s)
    report = _decide(name or target, step, behaviours, lines, status)
    problem = report.rows[0].happened if report.rows and report.rows[0].clue in ("missing", "stopped") else ""
    no_agent_loop = any(m.get("kind") == "unloadable" and m.get("no_agent_loop") is True for m in lines)
    student = name or Path(target).stem
    return Graded(student, target, report, problem, round(time.perf_counter() - started, 2), no_agent_loop)


@dataclass
class _Status:
    """How the child ended, as seen from outside."""

    returncode: int | None = None
    timed_out: bool = False
    output_bytes: int = 0
    stderr_tail: str = ""


def _run_child(
    target: str, step: str | None, seed: int, bound_s: float, limits: Limits, key: bytes, wall_s: float
) -> tuple[list[dict[str, Any]], _Status]:
    """Start the child, send it the key, collect its signed lines until it ends or `wall_s` passes."""
    job = {
        "target": str(Path(target).resolve()) if Path(target).exists() else target,
        "shown": target,
        "step": step,
        "seed": seed,
        "bound_s": bound_s,
        "limits": asdict(limits),
    }
    read_end, write_end = os.pipe()
    status = _Status()
    with tempfile.TemporaryDirectory(prefix="agentlab-grade-") as cwd:
        out_path = Path(cwd) / ".agentlab-output"
        bootstrap = (
            f"import sys; sys.path.insert(0, {str(ROOT)!r}); from agentlab.classroom.grading import child; child()"
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cwd, "LANG": "C.UTF-8", "TMPDIR": cwd}
        env["AGENTLAB_LANG"] = language()  # the child's rows (titles, hints) in this process's language
        with out_path.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-I", "-X", "utf8", "-c", bootstrap, str(write_end), json.dumps(job)],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=output,
                cwd=cwd,
                env=env,
                pass_fds=(write_end,),
                start_new_session=True,
            )
        os.close(write_end)
        try:
            assert process.stdin is not None
            process.stdin.write(key.hex().encode() + b"\n")
            process.stdin.close()
        except OSError:  # it died at once; what it managed to say (nothing) decides
            pass
        lines = _read_signed(read_end, key, time.monotonic() + wall_s, process)
        try:
            process.wait(timeout=max(0.0, 2.0))
        except subprocess.TimeoutExpired:
            status.timed_out = True
        _kill_group(process)
        status.returncode = process.wait()
        if lines and lines[-1].get("kind") == "timeout":
            status.timed_out = True
            lines.pop()
        with contextlib.suppress(OSError):
            status.output_bytes = out_path.stat().st_size
            with out_path.open("rb") as output:
                output.seek(max(0, status.output_bytes - 2000))
                status.stderr_tail = output.read().decode("utf-8", "replace")
    return lines, status


def _read_signed(fd: int, key: bytes, deadline: float, process: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    """Every correctly signed JSON line the child writes, until the pipe closes or the deadline passes."""
    import selectors

    lines: list[dict[str, Any]] = []
    buffer = b""
    with selectors.DefaultSelector() as selector, os.fdopen(fd, "rb", buffering=0) as pipe:
        selector.register(pipe, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                lines.append({"kind": "timeout"})
                _kill_group(process)
                break
            if not selector.select(timeout=min(left, 1.0)):
                continue
            chunk = pipe.read(65536)
            if not chunk:
                break
            buffer += chunk
            if len(buffer) > 16_000_000:  # a child flooding the channel is not grading
                _kill_group(process)
                break
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                message = _verify(line, key)
                if message is not None:
                    lines.append(message)
    return lines


def _verify(line: bytes, key: bytes) -> dict[str, Any] | None:
    signature, _, payload = line.partition(b" ")
    expected = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(signature, expected):
        return None
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the child and anything it started (it leads a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(process.pid, signal.SIGKILL)


def _decide(
    target: str, step: str | None, behaviours: Sequence[Any], lines: list[dict[str, Any]], status: _Status
) -> Report:
    """The report, from the child's signed lines and how it ended; anything missing is a failed row."""
    for message in lines:
        if message.get("kind") == "unloadable":
            return unloadable(target, step, str(message.get("problem")), str(message.get("hint")))
    verdicts = {"delegated": _DELEGATED, "tampered": _TAMPERED}
    for message in lines:
        kind = message.get("kind")
        if kind in verdicts:
            hint_id, hint = verdicts[kind]
            happened = str(message.get("what", ""))[:400]
            return _all_failed(target, step, behaviours, kind, happened, hint_id, hint)
    received = {}
    for message in lines:
        if message.get("kind") == "row" and isinstance(message.get("row"), dict):
            with contextlib.suppress(TypeError):
                row = Row(**message["row"])
                received[row.key] = row
    reason = _why_it_stopped(status, lines)
    rows = []
    for behaviour in behaviours:
        row = received.get(behaviour.key)
        title = _(behaviour.title)  # the child translated it too: it runs in this process's language
        if row is None or (row.title, row.step, row.reference) != (title, behaviour.step, behaviour.reference):
            row = Row(
                behaviour.key,
                title,
                behaviour.step,
                behaviour.reference,
                passed=False,
                expected=_("the grading process to run this behaviour and report it"),
                happened=reason,
                clue="stopped",
                hint=_(_STOPPED[1]),
                hint_id=_STOPPED[0],
            )
        rows.append(row)
    return Report(target, step, tuple(rows))


def _all_failed(
    target: str, step: str | None, behaviours: Sequence[Any], clue: str, happened: str, hint_id: str, hint: str
) -> Report:
    rows = tuple(
        Row(b.key, _(b.title), b.step, b.reference, False, _(_EXPECTED[clue]), happened, clue, _(hint), hint_id)
        for b in behaviours
    )
    return Report(target, step, rows)


def _why_it_stopped(status: _Status, lines: list[dict[str, Any]]) -> str:
    code = status.returncode
    if status.timed_out:
        return _("the grading process was stopped: it ran past its time limit")
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        cause = _SIGNAL_CAUSES.get(name, "")
        if cause:
            return _("the grading process ended on {signal}: {cause}").format(signal=name, cause=_(cause))
        return _("the grading process ended on {signal}").format(signal=name)
    said_end = any(m.get("kind") == "end" for m in lines)
    if not said_end:
        tail = status.stderr_tail.strip().splitlines()[-1:] if status.stderr_tail.strip() else []
        last = _(" (last output: {output})").format(output=tail[0][:200]) if tail else ""
        return (
            _(
                "the grading process ended (exit code {code}) before this behaviour was run: the submission "
                "stopped it (sys.exit, os._exit) or crashed it"
            ).format(code=code)
            + last
        )
    return _("the grading process did not report this behaviour")


_SIGNAL_CAUSES = {
    "SIGXCPU": "it used more CPU time than the limit",
    "SIGXFSZ": "it wrote more output (print) than the limit",
    "SIGKILL": "it was killed (memory, or it would not stop)",
}
_EXPECTED = {
    "delegated": "an agent_loop written in the submission",
    "tampered": "the submission to leave the checker alone",
}
_DELEGATED = (
    "diagnosis/delegated",
    "agent_loop handed the run to agentlab's own loop (agentlab.loop): a submission must implement the loop "
    "itself. Use the helpers the workbook imports (Tool, compact_json, AbortController, the errors), not agent_loop.",
)
_TAMPERED = (
    "diagnosis/tampered",
    "The submission changed the checker or the standard library it relies on (a function or class was replaced). "
    "Remove that code: a grade counts only an agent_loop that does the work.",
)
_STOPPED = (
    "diagnosis/stopped",
    "The grading process stopped before this behaviour was run. Look for sys.exit() or os._exit(), endless "
    "loops, huge prints or huge allocations in your file, at the top level or in agent_loop.",
)


# -- the child: load the submission, run the behaviours, report on the pipe -------------------------------------------


def child() -> None:
    """The child's entry point: `python -I -c "... child()" FD JOB`, with the key on stdin."""
    fd, job = int(sys.argv[1]), json.loads(sys.argv[2])
    key = bytes.fromhex(sys.stdin.readline().strip())
    _limit(job["limits"])
    os.set_inheritable(fd, False)
    lock = threading.Lock()
    # bound now, before any submitted code runs: replacing os.write or hmac.new later changes nothing here
    dumps, sign, sha256, write = json.dumps, hmac.new, hashlib.sha256, os.write

    def say(**message: Any) -> None:
        payload = dumps(message, ensure_ascii=True).encode()
        line = sign(key, payload, sha256).hexdigest().encode() + b" " + payload + b"\n"
        with lock:
            write(fd, line)

    try:
        _child(job, say)
    finally:
        os._exit(0)  # daemon threads a submission left spinning must not keep the process alive


def _limit(limits: dict[str, Any]) -> None:
    """Set this process's own limits (lowering a limit needs no privilege)."""
    import resource

    cpu = int(limits["cpu_s"])
    for which, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 5)),
        (resource.RLIMIT_AS, (int(limits["memory_mb"]) * 2**20,) * 2),
        (resource.RLIMIT_FSIZE, (int(limits["output_mb"] * 2**20),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, value)


def _child(job: dict[str, Any], say: Callable[..., None]) -> None:
    import agentlab.classroom.check as checker
    from agentlab import behaviours as behaviours_module

    behaviours_module.vary(job["seed"])
    target, step, bound_s = job["target"], job["step"], float(job["bound_s"])
    ours = target.startswith("agentlab.")  # checking agentlab's own loop by module name, as the docs do
    if not ours:
        _tripwire(say)
    plan = [(behaviour, behaviour.check) for behaviour in select(step)]  # held here, whatever happens to them
    run_behaviour, render_row = checker._run_behaviour, asdict
    watched = _snapshot()
    impl, problem, _step, hint = checker.load(target, float(job["limits"]["load_s"]))
    if impl is None:
        missing = problem == no_agent_loop(target)
        problem = problem.replace(target, job["shown"])  # the path as the teacher typed it, not the resolved one
        if "[Errno 27]" in problem:  # EFBIG: the output limit (RLIMIT_FSIZE) was reached
            problem = _("loading it wrote more output (print) than the limit, {megabytes} MB").format(
                megabytes=f"{job['limits']['output_mb']:g}"
            )
            hint = _("Remove the prints at the top level of the file.")
        say(kind="unloadable", problem=problem, hint=hint or "", no_agent_loop=missing)
        return
    if changed := _changed(watched):
        say(kind="tampered", what=_("loading the submission changed {name}").format(name=changed))
        return
    for behaviour, check in plan:
        row = run_behaviour(replace(behaviour, check=check), impl, bound_s)
        if changed := _changed(watched):
            what = _("while {key} ran, the submission changed {name}").format(key=behaviour.key, name=changed)
            say(kind="tampered", what=what)
            return
        say(kind="row", row=render_row(row))
    say(kind="end")


class DelegationError(AgentError):
    """The submission called agentlab's own loop instead of running its own."""


def _tripwire(say: Callable[..., None]) -> None:
    """Make any use of agentlab's own loop (by import, by reload, by a copy of its file) fail and be reported."""
    import agentlab.loop as loop_module

    loop_file = os.path.realpath(loop_module.__file__ or "")
    reported: list[str] = []

    def delegated(how: str) -> None:
        if not reported:
            reported.append(how)
            say(kind="delegated", what=_("agent_loop handed the run to agentlab's own loop ({how})").format(how=how))

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        delegated(_("it called agentlab.agent_loop"))
        raise DelegationError("agent_loop called agentlab's own loop; the submission must run its own")

    loop_module._Run.__init__ = refuse  # type: ignore[method-assign]

    fingerprint = _fingerprint(Path(loop_file).read_text(encoding="utf-8"))

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "exec" and args:
            filename = getattr(args[0], "co_filename", "")
        elif event == "compile" and len(args) > 1:
            filename = args[1]
            # Source compiled under another name (a pasted or read-in copy of loop.py) is found by its lines.
            if isinstance(args[0], (str, bytes)) and _copies(args[0], fingerprint):
                delegated(_("it compiled a copy of agentlab/loop.py's source"))
        else:
            return
        if isinstance(filename, (str, bytes)) and filename and _same_file(filename, loop_file):
            delegated(_("it executed a copy of agentlab/loop.py"))

    sys.addaudithook(audit)  # an audit hook cannot be removed, by design


def _fingerprint(source: str) -> frozenset[str]:
    """The long, distinctive lines of a source file: what a copy of it keeps whatever it is renamed to."""
    return frozenset(line.strip() for line in source.splitlines() if len(line.strip()) >= 40)


def _copies(source: str | bytes, fingerprint: frozenset[str]) -> bool:
    """Whether `source` holds most of the fingerprinted file (a student's own loop shares a handful of lines)."""
    if len(source) < 2000 or not fingerprint:
        return False
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    shared = sum(1 for line in text.splitlines() if line.strip() in fingerprint)
    return shared >= len(fingerprint) // 2


def _same_file(filename: str | bytes, loop_file: str) -> bool:
    name = os.fsdecode(filename)
    return name == loop_file or (os.path.basename(name) == "loop.py" and os.path.realpath(name) == loop_file)


_WATCHED_MODULES = (
    "agentlab",
    "asyncio",
    "builtins",
    "contextlib",
    "copy",
    "dataclasses",
    "hashlib",
    "hmac",
    "inspect",
    "json",
    "os",
    "re",
    "sys",
    "threading",
    "time",
    "weakref",
)


def _snapshot() -> dict[str, int]:
    """The identity of every function and class (and of their code) in the checker and the modules it uses."""
    seen: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in _WATCHED_MODULES:
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == name:
                seen[f"{name}.{attribute}"] = id(value)
                for member, inner in list(vars(value).items()):
                    if callable(inner) or isinstance(inner, (property, staticmethod, classmethod)):
                        seen[f"{name}.{attribute}.{member}"] = id(inner)
                        if code := getattr(inner, "__code__", None):
                            seen[f"{name}.{attribute}.{member}.__code__"] = id(code)
            elif callable(value) or type(value).__name__ == "module":
                seen[f"{name}.{attribute}"] = id(value)
                if code := getattr(value, "__code__", None):
                    seen[f"{name}.{attribute}.__code__"] = id(code)
    behaviours = sys.modules.get("agentlab.behaviours")
    for behaviour in getattr(behaviours, "ALL", ()):
        seen[f"the behaviour {behaviour.key}"] = id(behaviour.check)
    return seen


def _changed(before: dict[str, int]) -> str:
    """The first watched name whose object is no longer the same ("" if none)."""
    after = _snapshot()
    for name, identity in before.items():
        if after.get(name, identity) != identity:
            return _("{name} (it was replaced)").format(name=name)
    return ""


# -- a whole class --------------------------------------------------------------------------------------------------


def submissions(folder: Path, workbook: str | None = None) -> list[tuple[str, Path | None]]:
    """(student, submission) for each entry of `folder`: a .py or .ipynb file, or a subfolder holding one.

    In a subfolder the submission is `workbook` if given (one student's repository of a GitHub Classroom course
    holds every workbook), else `solution.py` if there is one, else its last workbook, else its only .py file; a
    subfolder with none of these is listed with None. With `workbook`, files beside the subfolders are left out.
    """
    found: list[tuple[str, Path | None]] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file() and entry.suffix in (".py", ".ipynb") and workbook is None:
            found.append((entry.stem, entry))
        elif entry.is_dir():
            chosen = entry / workbook if workbook is not None else None
            found.append((entry.name, (chosen if chosen.is_file() else None) if chosen else _pick(entry)))
    return found


def _pick(folder: Path) -> Path | None:
    if (folder / "solution.py").is_file():
        return folder / "solution.py"
    workbooks = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
    if workbooks:
        return workbooks[-1]
    scripts = sorted(p for p in folder.glob("*.py") if p.is_file())
    return scripts[0] if len(scripts) == 1 else None


def grade_class(
    folder: Path,
    out: Path,
    step: str | None = None,
    *,
    jobs: int | None = None,
    bound_s: float = BOUND_S,
    limits: Limits = Limits(),
    progress: Callable[[Graded], None] | None = None,
    workbook: str | None = None,
) -> list[Graded]:
    """Grade every submission in `folder`, `jobs` at a time (the CPU count); write `out`/grades.csv and feedback.

    `workbook` names the file to grade in each student's subfolder (see `submissions`)."""
    entries = submissions(folder, workbook)
    jobs = jobs or os.cpu_count() or 1

    def one(entry: tuple[str, Path | None]) -> Graded:
        student, path = entry
        if path is None:
            problem = _("no submission found (a .py file or a workbook)")
            report = unloadable(student, step, problem, _(_NO_SUBMISSION))
            return Graded(student, "", report, _("no submission found"))
        try:
            graded = grade(str(path), step, bound_s=bound_s, limits=limits, name=student)
        except GradingError as error:
            report = unloadable(student, step, str(error), _(_NO_SUBMISSION))
            graded = Graded(student, str(path), report, str(error))
        if progress:
            progress(graded)
        return graded

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, entries))
    write_grades(results, out, folder)
    return results


_NO_SUBMISSION = "Hand in one .py file (or the workbook) that defines agent_loop."

# A spreadsheet runs a cell that begins with one of these as a formula (=HYPERLINK(...), +cmd|...): a student's file
# or folder name, or an error message of theirs, could. Such a cell gets a leading apostrophe, which a spreadsheet
# shows as text and does not display (OWASP's advice for CSV injection; tab and carriage return are on its list too).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """`value` as a CSV cell a spreadsheet will not run: a string that starts like a formula is prefixed with '."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def step_label(step: str | None) -> str:
    """The `step` column: the workbook step a submission was graded at, or "all" for the whole exercise."""
    return step or "all"


def write_grades(results: Iterable[Graded], out: Path, folder: Path | None = None) -> Path:
    """`out`/grades.csv (the step, a column per behaviour, then the total) and `out`/<student>.txt, each one's rows.

    The feedback files go to students: they name a submission by its path inside `folder` (the class), and no
    absolute path of this machine (the class folder, agentlab's, the grading process's temporary folder, home).
    """
    results = list(results)
    out.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for graded in results:
        keys += [row.key for row in graded.report.rows if row.key not in keys]
    table = out / "grades.csv"
    with table.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "submission", "step", *keys, "passed", "total", "score", "problem"])
        for graded in results:
            marks = {row.key: int(row.passed) for row in graded.report.rows}
            report = graded.report
            cells = [
                graded.student,
                graded.path,
                step_label(report.step),
                *(marks.get(k, "") for k in keys),
                report.points,
                report.total,
                report.score,
                graded.problem,
            ]
            writer.writerow([csv_cell(cell) for cell in cells])
    for graded in results:
        rows = tuple(
            replace(
                row,
                expected=for_student(row.expected, graded.path, folder),
                happened=for_student(row.happened, graded.path, folder),
                hint=for_student(row.hint, graded.path, folder),
            )
            for row in graded.report.rows
        )  # before the text is wrapped into lines, which would cut a path in two
        text = render_text(replace(graded.report, target=graded.student, rows=rows))
        (out / f"{_safe_name(graded.student)}.txt").write_text(text + "\n", encoding="utf-8")
    return table


def for_student(text: str, path: str, folder: Path | None = None) -> str:
    """`text` with the grading machine's absolute paths taken out: the submission named by its path in the class."""
    swaps: list[tuple[str, str]] = []
    if path:
        inside = _inside(Path(path), folder)
        swaps += [(str(Path(path).resolve()), inside), (path, inside)]
    if folder is not None:
        for base in {str(folder.resolve()), str(folder)} - {"", "."}:
            swaps.append((base + os.sep, ""))
    swaps.append((str(ROOT) + os.sep, ""))  # agentlab's own files: agentlab/loop.py, not /home/teacher/.../loop.py
    for old, new in sorted(swaps, key=lambda swap: -len(swap[0])):  # the longest first: a path before its folder
        if old and old not in (os.sep, "."):
            text = text.replace(old, new)
    text = re.sub(re.escape(tempfile.gettempdir().rstrip(os.sep)) + r"/agentlab-grade-[^/\s]*/?", "", text)
    home = str(Path.home())
    return text.replace(home + os.sep, "~" + os.sep) if home not in ("", os.sep) else text


def _inside(path: Path, folder: Path | None) -> str:
    """The submission's path inside the class folder (bob/solution.py), or its name if it is not in it."""
    if folder is not None:
        try:
            return str(path.resolve().relative_to(folder.resolve()))
        except ValueError:
            pass
    return path.name


def _safe_name(student: str) -> str:
    return re.sub(r"[^\w.-]+", "_", student) or "student"


__all__ = [
    "DelegationError",
    "Graded",
    "GradingError",
    "Limits",
    "child",
    "csv_cell",
    "for_student",
    "grade",
    "grade_class",
    "refuse_bad_target",
    "scope",
    "step_label",
    "submissions",
    "write_grades",
]
