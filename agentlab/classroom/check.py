"""The student checker: run the reference behaviours against any `agent_loop`, and say what is wrong and why.

    from agentlab.classroom.check import check
    check(agent_loop)                    # every behaviour, one row each
    check(agent_loop, step="budgets")    # only the behaviours of one workbook step

The behaviours are the ones defined once in `agentlab.behaviours`; this module
only runs them and explains the result. Each row says pass or fail, what the
behaviour expected, what happened instead, and a hint for the mistake it most
likely is, chosen from the failure's `clue` (and, for mistakes that break every
behaviour alike, from what the student's code raised or returned).

Student code may do anything, so each behaviour runs on a thread of its own
with an event loop of its own, and the checker stops waiting for it after
`bound_s` seconds: code that raises anything, returns None, blocks its
thread, loops forever, leaks tasks or never awaits gets a failed row, never a
hung kernel or a crashed checker. An abandoned thread is a daemon; if it is
still busy a little later, it is asked to stop (CPython raises an exception in
it), so a `while True` left behind does not burn a core for the rest of the day.

A row's title, its labels and its hint are in the language in force (agentlab.i18n; the Polish is in
agentlab/locale/pl/classroom.po, keyed by the English of the behaviours' titles and of `HINTS`): the tables here hold
the English, translated when a row is made or shown. What a behaviour says it expected and what happened, and the
errors' messages, stay English; a report's JSON keeps its keys, clues and hint ids English in every language.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import ctypes
import functools
import html
import importlib
import importlib.util
import inspect
import json
import re
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentlab import callees
from agentlab.behaviours import EXTRA_STEPS, RUN_BOUND_S, STEPS, Behaviour, BehaviourFailed, select, watch_tasks
from agentlab.errors import AgentError, ConfigError
from agentlab.i18n import _, ngettext
from agentlab.lab import _look as look

# How long one behaviour may take before the checker gives up on it. A little
# more than the bound each behaviour puts on every run it makes, so that an
# await that never completes gets the behaviour's own, more precise verdict.
BOUND_S = RUN_BOUND_S + 2.0

# How long tasks the student's run started may take to finish after it
# returned, before they count as leaked.
LEAK_GRACE_S = 0.05

# How long after abandoning a thread the checker asks it to stop.
REAP_TRIES = 20  # how many times the reaper asks a runaway thread to stop, 0.1 s apart
REAP_AFTER_S = RUN_BOUND_S + 1.0

CLIP = 400

SIGNATURE = (
    "async def agent_loop(input, model, tools, *, max_turns=6, max_calls=8, timeout_ms=5000, "
    "max_chars=50_000, signal=None, forbid_repeats=False)"
)


class NotAsyncError(AgentError):
    """The implementation returned something that cannot be awaited: it is a plain `def`."""


class SignatureError(AgentError):
    """The implementation does not accept the arguments of the `agent_loop` contract."""


@dataclass(frozen=True)
class Row:
    """The verdict on one behaviour. A failed row says what was expected, what happened, and a hint."""

    key: str
    title: str
    step: str
    reference: bool
    passed: bool
    expected: str = ""
    happened: str = ""
    clue: str = ""
    hint: str = ""
    hint_id: str = ""


@dataclass(frozen=True)
class Report:
    """One row per behaviour checked. Renders as a table in Jupyter and as text in a terminal."""

    target: str
    step: str | None
    rows: tuple[Row, ...]
    bound_s: float = field(default=BOUND_S, compare=False)

    @property
    def passed(self) -> bool:
        """True when every row passed."""
        return bool(self.rows) and all(row.passed for row in self.rows)

    @property
    def points(self) -> int:
        """How many rows passed: the score of a workbook's check cell, for nbgrader's partial credit."""
        return sum(row.passed for row in self.rows)

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def score(self) -> float:
        """The share of rows that passed, from 0.0 to 1.0."""
        return round(self.points / self.total, 4) if self.rows else 0.0

    @property
    def failures(self) -> list[Row]:
        return [row for row in self.rows if not row.passed]

    def to_json(self) -> dict[str, Any]:
        """What a grader collects: the score, every row, and the hints of the failed rows."""
        return {
            "target": self.target,
            "step": self.step,
            "score": self.score,
            "passed": self.points,
            "total": self.total,
            "rows": [asdict(row) for row in self.rows],
            "hints": [{"key": row.key, "hint": row.hint} for row in self.failures],
        }

    def headline(self) -> str:
        scope = _("step {step}").format(step=repr(self.step)) if self.step else _("every step")
        verdict = (
            _("all pass") if self.passed else _("{points} of {total} pass").format(points=self.points, total=self.total)
        )
        return f"{self.target}, {scope}: {verdict}"

    def __str__(self) -> str:
        return render_text(self)

    def __repr__(self) -> str:
        return render_text(self)

    def _repr_html_(self) -> str:
        return render_html(self)


# -- running one behaviour ------------------------------------------------------


@dataclass
class _Seen:
    """What the guard saw the implementation do, across the runs of one behaviour."""

    returned: list[str] = field(default_factory=list)  # type names of results without .text and .history


def _guard(impl: Callable[..., Any], seen: _Seen) -> Callable[..., Any]:
    """`impl`, with its two structural mistakes turned into clear errors: not async, wrong signature."""

    @functools.wraps(impl)
    async def agent_loop(*args: Any, **kwargs: Any) -> Any:
        try:
            outcome = impl(*args, **kwargs)
        except TypeError as error:
            if error.__traceback__ is not None and error.__traceback__.tb_next is None:  # raised by the call itself
                raise SignatureError(
                    f"agent_loop cannot be called the way the contract calls it ({error}); "
                    f"its signature must be {SIGNATURE}"
                ) from error
            raise
        if not inspect.isawaitable(outcome):
            raise NotAsyncError(
                f"agent_loop returned {_short(repr(outcome), 60)} instead of something to await: "
                f"define it with `async def`, so that it can wait for the model and the tools"
            )
        result = await outcome
        try:
            shaped = hasattr(result, "text") and hasattr(result, "history")
        except Exception:  # an attribute that raises: the behaviour will find out for itself
            shaped = True
        if not shaped:
            seen.returned.append(type(result).__name__)
        return result

    return agent_loop


class _Abandoned(BaseException):
    """Raised inside a runaway thread the checker gave up on, to make it stop."""


def _stop_thread(thread: threading.Thread) -> None:
    """Ask a thread to stop by raising `_Abandoned` in it at its next Python instruction (CPython only)."""
    set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if set_async_exc is None or thread.ident is None or not thread.is_alive():
        return
    set_async_exc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandoned))


def _reap(thread: threading.Thread) -> None:
    """Stop the thread, asking again while it lives: an exception that lands in a gc callback or a `__del__` is
    reported as unraisable and lost, and the thread runs on (seen once: inside hypothesis's gc callback)."""
    for _attempt_number in range(REAP_TRIES):
        if not thread.is_alive():
            return
        _stop_thread(thread)
        thread.join(0.1)


def _reap_later(thread: threading.Thread) -> None:
    """Stop an abandoned thread if it is still busy a little later (one waiting on its own bound ends by itself)."""
    reaper = threading.Timer(REAP_AFTER_S, _reap, (thread,))
    reaper.name = "agentlab-check reaper"
    reaper.daemon = True
    reaper.start()


async def _leftover_tasks(before: set[asyncio.Task[Any]] | None = None) -> list[asyncio.Task[Any]]:
    """Tasks the run started (not in `before`) still running a moment after it ended; they are cancelled."""
    me = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() - (before or set()) if task is not me and not task.done()]
    if others:
        await asyncio.wait(others, timeout=LEAK_GRACE_S)
    held = callees.running_inline()  # with no threads, a plain callee holds its task as it would hold a thread
    leaked = [task for task in others if not task.done() and task not in held]
    for task in leaked:
        task.cancel()
    if leaked:
        await asyncio.wait(leaked, timeout=LEAK_GRACE_S)
    return leaked


async def _attempt(
    behaviour: Behaviour, agent_loop: Callable[..., Any], before: set[asyncio.Task[Any]] | None = None
) -> tuple[BaseException | None, int]:
    """Run the behaviour; return what it raised (None if it passed) and how many tasks were left running."""
    try:
        await behaviour(agent_loop)
        outcome: BaseException | None = None
    except (_Abandoned, GeneratorExit):  # the checker gave up on this thread, or the coroutine is being closed
        raise
    except BaseException as error:  # BehaviourFailed, or anything the student's code threw at the behaviour
        outcome = error
    return outcome, len(await _leftover_tasks(before))


def _ignore(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The behaviour loops' exception handler: the student's stray tasks must not write to the cell's stderr."""


def _close(loop: asyncio.AbstractEventLoop) -> None:
    with contextlib.suppress(BaseException):
        loop.run_until_complete(loop.shutdown_asyncgens())
    with contextlib.suppress(BaseException):
        loop.close()  # does not wait for worker threads a blocking model left behind


def _hung(bound_s: float) -> BehaviourFailed:
    """The failure of a behaviour the checker stopped waiting for after `bound_s`."""
    return BehaviourFailed(
        _("the behaviour to finish within {seconds} s").format(seconds=f"{bound_s:g}"),
        _("agent_loop was still running after {seconds} s, so the checker stopped waiting for it").format(
            seconds=f"{bound_s:g}"
        ),
        "hung",
    )


def _leaked(leaked: int, outcome: BaseException | None) -> BehaviourFailed:
    """The failure of a run that left `leaked` tasks running (after `outcome`, what the behaviour said, if any)."""
    also = "" if outcome is None else _(" (and then: {error})").format(error=outcome)
    return BehaviourFailed(
        _("no task of the run to be still running once agent_loop has returned or raised"),
        ngettext("{n} task of the run was still running", "{n} tasks of the run were still running", leaked).format(
            n=leaked
        )
        + also,
        "leaked_tasks",
    )


def _run_behaviour(behaviour: Behaviour, impl: Callable[..., Any], bound_s: float) -> Row:
    """Run one behaviour on its own daemon thread and event loop; give up on it after `bound_s`."""
    seen = _Seen()
    box: dict[str, Any] = {}
    finished = threading.Event()

    def on_own_thread() -> None:
        try:
            loop = box["loop"] = asyncio.new_event_loop()
            loop.set_exception_handler(_ignore)
            watch_tasks(loop)
            try:
                box["outcome"] = loop.run_until_complete(_attempt(behaviour, _guard(impl, seen)))
            except BaseException as error:  # Ctrl-C or exit raised by student code, or _Abandoned
                box["outcome"] = (error, 0)
            finally:
                finished.set()
                _close(loop)
        except BaseException:  # _Abandoned arriving late: nobody is listening any more
            finished.set()

    thread = threading.Thread(target=on_own_thread, name=f"agentlab-check {behaviour.key}", daemon=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread.start()
        if not finished.wait(bound_s):
            _reap_later(thread)
            failure = _hung(bound_s)
            return _row(behaviour, failure, seen, [], _case_in_loop(box.get("loop"), thread, behaviour.key))
        thread.join(LEAK_GRACE_S)  # a coroutine the run never awaited warns as the thread lets go of it
        outcome, leaked = box.pop("outcome", (RuntimeError("the checker could not start an event loop"), 0))
        case = _case_in_traceback(outcome, behaviour.key) if isinstance(outcome, BehaviourFailed) else ""
        for error in _causes(outcome) if outcome is not None else []:
            error.__traceback__ = None  # let go of the run's frames now, so that what they held warns here
        warned = [str(w.message) for w in caught]
    if leaked and not (
        isinstance(outcome, BehaviourFailed) and outcome.clue in ("leaked_tasks", "swallowed_cancel", "hung")
    ):
        outcome = _leaked(leaked, outcome)
    return _row(behaviour, outcome, seen, warned, case)


def _run_behaviour_here(behaviour: Behaviour, impl: Callable[..., Any], bound_s: float) -> Row:
    """With no threads (Pyodide, in a browser): run the behaviour on this thread, bounded by an asyncio timeout.

    The bound then holds only against code that awaits: a `while True` that never does holds the page until
    it returns, as any code in a cell would.
    """
    seen = _Seen()

    async def bounded() -> tuple[BaseException | None, int]:
        watch_tasks(asyncio.get_running_loop())
        before = asyncio.all_tasks()
        try:
            return await asyncio.wait_for(_attempt(behaviour, _guard(impl, seen), before), bound_s)
        except TimeoutError:
            failure = _hung(bound_s)
            return failure, 0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome, leaked = _wait_here(bounded())
        warned = [str(w.message) for w in caught]
    case = _case_in_traceback(outcome, behaviour.key) if isinstance(outcome, BehaviourFailed) else ""
    if leaked and outcome is None:
        outcome = _leaked(leaked, None)
    return _row(behaviour, outcome, seen, warned, case)


def _wait_here(run: Any) -> Any:
    """Run a coroutine to its end from plain code, with no threads: its own loop, or Pyodide's `run_sync`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a script: nothing runs yet, so the behaviour may have a loop of its own
        return asyncio.run(run)
    try:
        from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]
    except ImportError:
        can_run_sync = None
    if can_run_sync is None or not can_run_sync():
        run.close()
        raise ConfigError(
            "check() cannot wait for the behaviours here: there are no threads, and this browser cannot "
            "suspend a cell (Pyodide's run_sync needs JSPI: use a recent Chrome, Edge or Firefox)"
        )
    return run_sync(run)


# What a behaviour was trying when the run hung: the decision its model was giving, read from the behaviour's own
# frame (a local named `decision`, as in malformed_decisions), so that the hint can name the case.
_CASE_LOCAL = "decision"
_NO_CASE = object()


def _describe_case(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _short(text, 160)


def _case_in_frames(frames: Iterable[Any], key: str) -> str:
    for frame in frames:
        if frame.f_code.co_name == key:
            value = frame.f_locals.get(_CASE_LOCAL, _NO_CASE)
            if value is not _NO_CASE:
                return _describe_case(value)
    return ""


def _case_in_traceback(error: BaseException, key: str) -> str:
    """The case a behaviour was trying when one of its runs hung (its bound fired): from the failure's traceback."""
    if error.clue != "hung":  # type: ignore[attr-defined]
        return ""
    frames, tb = [], error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return _case_in_frames(frames, key)


def _case_in_loop(loop: asyncio.AbstractEventLoop | None, thread: threading.Thread, key: str) -> str:
    """The case a behaviour was trying when its thread stopped answering: from its suspended or running frames."""
    frames: list[Any] = []
    with contextlib.suppress(Exception):
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
    with contextlib.suppress(Exception):
        for task in list(asyncio.all_tasks(loop)) if loop is not None else []:
            coroutine = task.get_coro()
            while coroutine is not None and len(frames) < 1000:
                if (frame := getattr(coroutine, "cr_frame", None)) is not None:
                    frames.append(frame)
                coroutine = getattr(coroutine, "cr_await", None)
    return _case_in_frames(frames, key)


def _row(behaviour: Behaviour, outcome: BaseException | None, seen: _Seen, warned: list[str], case: str = "") -> Row:
    """The verdict on one behaviour, in the language in force: its title, what happened and its hint."""
    title = _(behaviour.title)
    base = {"key": behaviour.key, "title": title, "step": behaviour.step, "reference": behaviour.reference}
    if outcome is None:
        return Row(**base, passed=True)
    if isinstance(outcome, BehaviourFailed):
        expected, happened, clue = outcome.expected, outcome.happened, outcome.clue
        shown = happened
    else:  # the behaviour itself stumbled over what agent_loop returned, or student code raised past it
        expected = _("the behaviour to run to its end: {title}").format(title=f"{title[0].lower()}{title[1:]}")
        happened = f"checking it raised {type(outcome).__name__}: {outcome}"  # English: hint_for reads it
        shown = _("checking it raised {error_class}: {error}").format(error_class=type(outcome).__name__, error=outcome)
        clue = "crashed"
    hint_id, hint = hint_for(behaviour.key, clue, _causes(outcome), happened, seen.returned, warned)
    hint = _(hint)
    if case and hint_id.endswith("/hung"):
        hint = _name_the_case(hint, case)
    return Row(**base, passed=False, expected=expected, happened=_short(shown), clue=clue, hint=hint, hint_id=hint_id)


def _name_the_case(hint: str, case: str) -> str:
    """A hang's hint (in the language in force), saying which of the behaviour's cases the run hung on."""
    opening = _("agent_loop never finished.")
    if hint.startswith(opening):
        return _("agent_loop never finished when the model answered {case}.").format(case=case) + hint[len(opening) :]
    return _("The run hung when the model answered {case}.").format(case=case) + " " + hint


def _causes(error: BaseException) -> list[BaseException]:
    """The error and the chain of errors behind it."""
    chain: list[BaseException] = []
    while error is not None and error not in chain and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)  # type: ignore[assignment]
    return chain


def _short(text: str, limit: int = CLIP) -> str:
    if len(text) <= limit:
        return text
    more = len(text) - limit
    return text[:limit] + ngettext("… (+{more} chars)", "… (+{more} chars)", more).format(more=more)


# -- checking -------------------------------------------------------------------


def check(impl: Any, step: str | None = None, *, bound_s: float = BOUND_S, name: str | None = None) -> Report:
    """Run the behaviours (all, or one workbook `step`) against `impl`; one row per behaviour.

    `impl` is any function with the `agent_loop` signature. Nothing it does can
    hang or crash the check: each behaviour runs on a thread of its own and is
    given up after `bound_s` seconds. Works in a script and in a Jupyter cell.
    """
    behaviours = _behaviours(step)
    target = name or _name(impl)
    if not callable(impl):
        return unloadable(
            target,
            step,
            _("agent_loop is {value}, not a function").format(value=_short(repr(impl), 60)),
            _("Define the function: {signature}.").format(signature=SIGNATURE),
        )
    run = _run_behaviour if callees.THREADS else _run_behaviour_here  # a browser's Pyodide has no threads
    return Report(target, step, tuple(run(b, impl, bound_s) for b in behaviours), bound_s)


def unloadable(target: str, step: str | None, problem: str, hint: str) -> Report:
    """A report in which every behaviour failed for the same reason: there is nothing to run.

    `problem` and `hint` are shown as they are given (in the language in force); the titles are translated here.
    """
    failed = {"passed": False, "expected": _("an agent_loop function to run"), "happened": problem, "clue": "missing"}
    rows = tuple(
        Row(b.key, _(b.title), b.step, b.reference, **failed, hint=hint, hint_id="diagnosis/missing")
        for b in _behaviours(step)
    )
    return Report(target, step, rows)


def _behaviours(step: str | None) -> Sequence[Behaviour]:
    if step is not None and step not in STEPS + EXTRA_STEPS:
        steps = ", ".join(STEPS + EXTRA_STEPS)
        raise ConfigError(f"no step {step!r}; the steps are: {steps} (or None for every workbook step)")
    return select(step)


def _name(impl: Any) -> str:
    name = getattr(impl, "__qualname__", None) or getattr(impl, "__name__", None)
    module = getattr(impl, "__module__", None)
    if not isinstance(name, str):
        return "agent_loop"
    return f"{module}.{name}" if module not in (None, "__main__", "builtins") else name


# -- loading a student's file, module or notebook ------------------------------------

LOAD_BOUND_S = 10.0


def load(target: str, bound_s: float = LOAD_BOUND_S) -> tuple[Callable[..., Any] | None, str, str | None, str | None]:
    """Find `agent_loop` in a .py file, a submitted workbook (.ipynb) or an importable module.

    Returns `(agent_loop or None, problem or "", the workbook's step or None, a hint)`. The student's
    code runs at load time, so loading too is bounded and may fail only into the returned problem.
    """
    path = Path(target)
    box: dict[str, Any] = {}
    finished = threading.Event()

    def on_own_thread() -> None:
        try:
            if path.suffix == ".ipynb":
                box["namespace"], box["step"] = _run_notebook(path)
            elif path.suffix == ".py" or path.exists():
                box["namespace"] = _run_file(path)
            else:
                box["namespace"] = vars(importlib.import_module(target))
        except BaseException as error:  # whatever the student's module does at import time
            box["error"] = error
        finally:
            finished.set()

    threading.Thread(target=on_own_thread, name="agentlab-check load", daemon=True).start()
    if not finished.wait(bound_s):
        problem = _("loading {target} did not finish within {seconds} s").format(target=target, seconds=f"{bound_s:g}")
        return None, problem, None, _("Remove the code that runs (or waits) at the top level of the file.")
    if "error" in box:
        error = box["error"]
        problem = _("loading {target} raised {error_class}: {error}").format(
            target=target, error_class=type(error).__name__, error=error
        )
        return None, problem, None, _("Fix the error above: the file must run on its own (python path/to/file.py).")
    step = box.get("step")
    impl = box["namespace"].get("agent_loop")
    if impl is None:
        problem = no_agent_loop(target)
        return None, problem, step, _("Define it at the top level: {signature}.").format(signature=SIGNATURE)
    return impl, "", step, None


def no_agent_loop(target: str) -> str:
    """The problem `load` gives for a file that defines no agent_loop (in the language in force)."""
    return _("{target} defines no agent_loop").format(target=target)


def _run_file(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"agentlab_checked_{abs(hash(str(path.resolve())))}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return vars(module)


def _run_notebook(path: Path) -> tuple[dict[str, Any], str | None]:
    """Run a workbook's code cells, except its check cells, in one namespace; return it and the workbook's step."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "__main__", "display": lambda *objects, **options: None}
    for number, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code" or "check" in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell.get("source", ""))
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
        code = compile("\n".join(lines), f"{path.name}, cell {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        outcome = eval(code, namespace)  # a cell with a top-level await compiles to a coroutine
        if inspect.iscoroutine(outcome):
            asyncio.run(outcome)
    step = notebook.get("metadata", {}).get("agentlab", {}).get("step")
    return namespace, step if step in STEPS else None


def main(
    target: str, step: str | None = None, as_json: bool = False, bound_s: float | None = None, seed: int | None = None
) -> int:
    """`python -m agentlab check TARGET`: grade it in a process of its own, print the report (or its JSON).

    Exit code 0 when every row passes, 1 when one fails, 2 when there is nothing to check (no such file, a
    folder, a file that cannot be read, no agent_loop in it): then one line says why.
    """
    from agentlab.classroom.grading import GradingError, grade

    try:
        graded = grade(target, step, bound_s=bound_s or BOUND_S, seed=seed)
    except GradingError as error:  # its message stays English (a package's error); in Polish a sentence follows
        print(_("agentlab check: {error}").format(error=error), file=sys.stderr)
        return 2
    if graded.no_agent_loop:
        message = _("agentlab check: {target} defines no agent_loop ({signature})")
        print(message.format(target=target, signature=SIGNATURE), file=sys.stderr)
        return 2
    report = graded.report
    print(json.dumps(report.to_json(), indent=2, ensure_ascii=False) if as_json else render_text(report))
    return 0 if report.passed else 1


# -- hints ------------------------------------------------------------------------

# Mistakes that break every behaviour alike, found in what the student's code raised.
_DIAGNOSES: dict[type[BaseException], tuple[str, str]] = {
    NotImplementedError: (
        "diagnosis/not_implemented",
        "This part is not written yet: replace each `raise NotImplementedError()` under `# YOUR CODE HERE` "
        "with your code, run that cell again, then this one.",
    ),
    NotAsyncError: (
        "diagnosis/not_async",
        "agent_loop must be an `async def` function: it awaits the model and the tools, and whoever calls it "
        "awaits it. A plain `def` returns its result at once and can never wait for a slow model.",
    ),
    SignatureError: (
        "diagnosis/signature",
        f"The behaviours call agent_loop with the contract's arguments; give it exactly this signature: {SIGNATURE}.",
    ),
}

_NOT_A_RESULT = (
    "diagnosis/not_a_result",
    "Return `AgentResult(text=..., history=..., usage=Usage(...))` (from agentlab) when the model answers: "
    "the behaviours read result.text and result.history as attributes.",
)
_EXCEPTION_GROUP = (
    "diagnosis/exception_group",
    "Your loop let an ExceptionGroup out (asyncio.TaskGroup wraps what its tasks raise): catch it with "
    "`except* Exception` or look at error.exceptions, and raise the error inside it (the ToolError, the "
    "UnknownToolError, ...), so that the caller sees which rule stopped the run.",
)
_SWALLOWED_CANCEL = (
    "diagnosis/swallowed_cancel",
    "A CancelledError was caught and turned into something else (an error, or a result): catch Exception, not "
    "BaseException, around the model and the tools, and never `except asyncio.CancelledError` without raising it "
    "again. When the deadline or an abort cancels the run, the cancellation must reach your race.",
)
_NO_MAX_REFUSALS = (
    "diagnosis/no_max_refusals",
    "The recovery rows call agent_loop(..., max_refusals=N), beyond the workbooks' contract: add "
    "`max_refusals=0` to its keyword arguments, keep the exercise's behaviour when it is 0, and give up to N "
    "refused batches back to the model otherwise (notebook 11).",
)
_NEVER_AWAITED = (
    "diagnosis/never_awaited",
    "Python warned that a coroutine was never awaited: somewhere you call an async function (the model, "
    "a tool's run, a helper of yours) without `await`. Call models and tools with `await invoke(fn, ...)`.",
)
_JSON_SPACES = (
    "diagnosis/json_spaces",
    "The tool result has spaces after ':' and ',', as json.dumps writes it. The model gets what JavaScript's "
    "JSON.stringify writes: no spaces, non-ASCII text kept as it is, 18.0 written as 18. Write results with "
    "`compact_json(result)` from agentlab, which does all three.",
)

_BUDGETS_FIRST = (
    "Before each model call check, in this order: the outside signal, the deadline, then "
    "`turns >= max_turns` (turn budget), then the context size against max_chars (context budget). "
)
_RACE = (
    "Checking the clock between steps cannot stop a model or a tool that never returns: the loop is stuck in "
    "its `await`. Run the steps as a task and race it against the deadline "
    "(`asyncio.wait({task, ...}, timeout=timeout_ms / 1000, return_when=FIRST_COMPLETED)`); when time is up, "
    "abort the run's own signal, cancel the task and raise DeadlineError('deadline exceeded ...')."
)
_NOTHING_AFTER = (
    "Your loop raised, but its work went on: a model call or a tool run happened after agent_loop had raised. "
    "When the deadline or an abort wins the race, cancel the task of the steps (task.cancel()) and let no "
    "worker of yours start anything after that."
)
_IDENTITY = (
    "Raise the signal's reason itself (raise signal.reason), the very exception the caller gave to abort(): "
    "not a new error with the same message, and not a wrapper. The caller may compare it with `is`."
)
_UNKNOWN = (
    "A name that is not a key of tools must stop the run, before anything of the batch runs, with an error "
    "saying 'unknown tool': UnknownToolError(f'unknown tool {name!r}'), not the KeyError of tools[name]."
)
_WHOLE_BATCH = (
    "Check the whole batch before running any of it: first every call's id, name and args (check_batch), "
    "then run them one by one. Checking each call just before running it runs the good calls before the bad one "
    "is found."
)

# Keyed "behaviour/clue"; "behaviour/kind:*" matches every clue of that kind, "behaviour/*:detail" every kind
# with that detail, "behaviour/*" the whole behaviour, and "*/clue" any behaviour.
_PAST_TURNS = (
    "max_turns is the number of model calls allowed, no more: before each call, refuse when the calls "
    "made so far are already >= max_turns (a check with > lets one turn too many through)."
)
_PAST_CALLS = (
    "max_calls is the number of tool runs allowed over the whole run: refuse a batch before it runs when "
    "calls made + len(batch) > max_calls, and count every run, in every turn."
)

HINTS: dict[str, str] = {
    # basics
    "result_reaches_model/no_second_turn": (
        "After running the calls, ask the model again with the results in the history: the loop goes "
        "model → tools → model until the model returns {'kind': 'final'}."
    ),
    "result_reaches_model/wrong_tool_message": (
        "Each result goes into the history, and so to the model, as exactly "
        "{'role': 'tool', 'call_id': <the id of the call it answers>, 'content': compact_json(result)}: "
        "the key is call_id, and content is JSON text, not the result itself."
    ),
    "result_reaches_model/wrong_result": (
        "When the model answers, return AgentResult(text=decision['text'], history=history, usage=Usage(...)): "
        "result.text must be the model's final text."
    ),
    "history_shape/history": (
        "result.history is: the user message; for each tool turn one {'role': 'assistant', 'calls': [...]} "
        "(each call as {'id', 'name', 'args'}) followed by one tool message per call; and at the end "
        "{'role': 'assistant', 'content': text}. Nothing else, in that order."
    ),
    "results_in_call_order/call_order": (
        "Run a batch's calls in the order the model gave them, and tie each result to its own call: "
        "use the id of the call you just ran (not the first or last id of the batch, not a counter)."
    ),
    "compact_json_results/json_format": (
        "A tool's result goes back as compact_json(result) (from agentlab), byte-identical to JavaScript's "
        "JSON.stringify: no spaces, non-ASCII kept as is, 18.0 written as 18. json.dumps differs on all three."
    ),
    "result_reaches_model/sync_tool": (
        "A tool's run may be a plain `def` as well as an `async def`: call it with `await invoke(run, value, "
        "signal)`, which awaits an async function and runs a plain one on a worker thread; `await run(...)` fails "
        "for a plain one."
    ),
    "model_sees_snapshot/shallow_snapshot": (
        "A shallow copy (list(history), [dict(m) for m in history]) still shares the calls lists and args dicts "
        "inside the messages: the model changed those, and your history changed with them. Give the model "
        "copy.deepcopy(history)."
    ),
    "model_sees_snapshot/shared_history": (
        "Give the model a copy of the history (copy.deepcopy(history)), never your own list: whatever the model "
        "does to the messages it is given must not change what your loop remembers."
    ),
    # checks
    "unknown_tool/*:deleteEverything": _UNKNOWN,
    "unknown_tool/*:toString": _UNKNOWN,
    "unknown_tool/*:__class__": (
        "Look a tool up only among the keys of tools: tools.get(name), or `name in tools`. getattr(), hasattr() "
        "or attribute access also find names every object has, such as __class__, which are not tools."
    ),
    "unknown_tool/*:keys": (
        "Look a tool up only among the keys of tools: tools.get(name), or `name in tools`. getattr(tools, name) "
        "finds the dict's own methods, such as keys, which are not tools."
    ),
    "unknown_tool/*:near_name": (
        "A tool name is an exact key of tools: compare it as it is, with no lower(), strip() or other clean-up. "
        "A name that differs in case, spaces or separators is an unknown tool, and nothing of its batch runs."
    ),
    "invalid_args_never_run/*:other_error": (
        "A validate may fail with any exception (KeyError, TypeError, its own class), not only ValueError: catch "
        "Exception around tool.validate(args) and raise ToolArgsError(f'invalid args for {name}: {error}') from it."
    ),
    "invalid_args_never_run/ran:*": (
        "Call the tool's validate(args) for every call before running any: if it raises, raise "
        "ToolArgsError(f'invalid args for {name}: {error}') and run nothing."
    ),
    "invalid_args_never_run/*": (
        "When a tool's validate raises, stop the run with an error whose message contains 'args', such as "
        "ToolArgsError(f'invalid args for {name}: {error}'), raised from the validate's error."
    ),
    "duplicate_call_id/*:turns_later": (
        "Remember every call id of the whole run, not just the ids of the previous turn: an id used two or "
        "more turns earlier is a duplicate too. Keep one set for the run, created before the loop."
    ),
    "duplicate_call_id/near_ids": (
        "Compare call ids exactly as they are: 'c1', 'C1' and 'c1 ' are three different ids. Do not lower(), "
        "strip() or otherwise clean them up before the duplicate check."
    ),
    "duplicate_call_id/*": (
        "Remember every call id of the run in a set that lives across turns (not just this batch), and refuse "
        "an id seen before with DuplicateCallIdError('duplicate call id ...') before running anything."
    ),
    "malformed_decisions/ran:*": (
        "Check the shape of the whole decision, every one of its calls, before running any of it: "
        "check_decision returns only once every call passed, and the loop runs nothing before it returns."
    ),
    "malformed_decisions/hung": (
        "agent_loop never finished. A decision your loop does not refuse can send it round forever: one that "
        "runs nothing makes it ask the model again, and again. Refuse every decision of the wrong shape with "
        "ModelOutputError('malformed ...') before reading it."
    ),
    "malformed_decisions/*:malformed_kind": (
        "Check the decision's kind first: only 'final' and 'tools' exist; anything else is refused with "
        "ModelOutputError('malformed decision ...')."
    ),
    "malformed_decisions/*:malformed_no_calls": (
        "A 'tools' decision needs a non-empty list of calls; an empty list is refused as malformed "
        "(otherwise the model can spend turns doing nothing)."
    ),
    "malformed_decisions/*:malformed_call": (
        "Check each call's shape before anything else reads it: a dict with a non-empty string id, a string "
        "name and a dict args; a call without args is refused with ModelOutputError('malformed call ...')."
    ),
    "malformed_decisions/*:malformed_text": (
        "A 'final' decision's text must be a string; refuse anything else (None too) as malformed."
    ),
    "malformed_decisions/*:malformed_not_dict": (
        "The model may return anything at all: check isinstance(decision, dict) before reading "
        "decision['kind'], and refuse anything else with ModelOutputError('malformed decision ...')."
    ),
    "inherited_names_refused/*": (
        "tools[name] on a defaultdict does not raise KeyError: it makes up a tool on the spot. Use "
        "tools.get(name) (or `name in tools`), which never invent a key."
    ),
    "batch_checked_whole/ran:*": _WHOLE_BATCH,
    "batch_checked_whole/*:half_batch_id": (
        "Call ids must be unique within a batch as well as across turns: a batch that repeats an id is refused "
        "whole, with 'duplicate call id', before any of its calls runs."
    ),
    "batch_checked_whole/*": _WHOLE_BATCH,
    "args_copied_at_boundary/args_not_copied": (
        "Copy the args when you check them (copy.deepcopy(call['args'])) and use that copy for validate, run and "
        "the history: the model still holds the dict it proposed and may change it after your check."
    ),
    "args_copied_at_boundary/shallow_copy": (
        "dict(args) or args.copy() is a shallow copy: the lists and dicts inside are still the model's, and it "
        "changed them while your tool ran. Copy the args with copy.deepcopy(call['args']) when you check them."
    ),
    "args_copied_at_boundary/validated_value_ignored": (
        "validate may parse the args and return something else: what it returns is what run gets (run gets the "
        "args only when validate returns None). value = tool.validate(mine); run(mine if value is None else value)."
    ),
    "args_copied_at_boundary/history_not_copied": (
        "The history must record the args as they were checked: store your copy, not the dict the model "
        "proposed (the model can still change that one)."
    ),
    "tool_failures_reported/*:tool_raised": (
        "Wrap the tool's run: if it raises, raise ToolError(f'tool {name} raised {type(error).__name__}: "
        "{error}') from error, so the message names the tool and keeps the original reason."
    ),
    "tool_failures_reported/*:not_json": (
        "If compact_json refuses a tool's result (a set, bytes, an object...), raise "
        "ToolError(f'tool {name} returned a result that is not JSON: {error}')."
    ),
    "tool_failures_reported/tool_not_named": (
        "The error must say which tool failed: put its name in the message, "
        "ToolError(f'tool {name} raised {type(error).__name__}: {error}')."
    ),
    "tool_failures_reported/bare:*": (
        "A tool's failure must end in a clear error naming the tool (ToolError), not a bare TypeError or KeyError."
    ),
    "repeats_forbidden/*:repeats_gap": (
        "Remember every (name, args) pair of the run in a set, not just the previous call: A, then B, then A "
        "again is a repeat too."
    ),
    "repeats_forbidden/*:repeats_batch": (
        "A batch can repeat itself: check each call against the pairs of the run AND of the calls before it in "
        "the same batch, and refuse the whole batch before any of it runs."
    ),
    "repeats_forbidden/repeats_false_positive": (
        "A repeat is the same tool with the same args, compared exactly (compact_json(args)): other args, or the "
        "same args for another tool, are not repeats. Key the set by (name, compact_json(args))."
    ),
    "repeats_forbidden/repeats_default": (
        "Repeats are refused only when forbid_repeats=True; by default (forbid_repeats=False) the same call may "
        "run again."
    ),
    "repeats_forbidden/*": (
        "With forbid_repeats=True, remember (name, compact_json(args)) of every call of the run and refuse the "
        "same pair again with RepeatedCallError('repeated tool call without progress ...'), before it runs."
    ),
    # budgets
    "tool_and_turn_budgets/ran:max_calls": (
        "Compare the calls made so far plus the whole batch with max_calls before running anything: with "
        "max_calls=0 the very first call is refused ('tool budget') and never runs."
    ),
    "tool_and_turn_budgets/*:max_calls": (
        "Before running a batch, refuse it with ToolBudgetError('tool budget ...') if calls made + len(calls) "
        "> max_calls: with max_calls=0 no call may run."
    ),
    "tool_and_turn_budgets/*:max_turns": (
        "Before each model call, refuse it when the turns made so far are already >= max_turns: with "
        "max_turns=1 the model is called once, and asking it a second time must raise "
        "TurnBudgetError('turn budget ...')."
    ),
    "tool_and_turn_budgets/*:calls_per_turn": (
        "max_calls counts the tool runs of the whole run, not of one turn: keep calls_made across turns (never "
        "reset it) and refuse a batch when calls_made + len(calls) > max_calls."
    ),
    "tool_and_turn_budgets/ran:calls_per_turn": (
        "Check the budget for the whole batch before running any of it (calls made + len(calls) > max_calls): "
        "with max_calls=3 and 2 calls made, a batch of 2 is refused whole; counting one call at a time runs half "
        "of it first."
    ),
    "budget_before_running/*": (
        "Check the budget for the whole batch before running any of it (calls made + len(calls) > max_calls): "
        "counting one call at a time runs half the batch and only then refuses."
    ),
    "limits_reached_exactly/exact_turns_calls": (
        "Reaching a limit is allowed, only going past it fails: refuse a model call when turns >= max_turns "
        "counted before the call, and a batch when calls made + len(calls) > max_calls (not >=)."
    ),
    "limits_reached_exactly/exact_context": (
        "A history of exactly max_chars characters fits: refuse only when the size is > max_chars, and count "
        "only the content (the 4 characters of 'abcd'), not the keys or the role."
    ),
    "limits_reached_exactly/past_turns": _PAST_TURNS,
    "limits_reached_exactly/*:past_turns": _PAST_TURNS,
    "limits_reached_exactly/past_calls": _PAST_CALLS,
    "limits_reached_exactly/*:past_calls": _PAST_CALLS,
    "limits_reached_exactly/exact_output": (
        "A final text of exactly max_chars characters fits: refuse it only when len(text) > max_chars."
    ),
    # deadline
    "deadline_ignoring_signal/hung": "agent_loop never finished. " + _RACE,
    "deadline_ignoring_signal/*:whole_run": (
        "The deadline is for the whole run, set once when it starts (deadline = start + timeout_ms / 1000), "
        "not a new timeout for each step: race the whole run's task against it. " + _RACE
    ),
    "deadline_ignoring_signal/ran_after_deadline": _NOTHING_AFTER,
    "deadline_ignoring_signal/*": _RACE,
    "deadline_blocking_model/*:blocking_model": (
        "A plain `def` model that blocks (time.sleep, a slow HTTP call) must not hold up the deadline: call "
        "models and tools with `await invoke(fn, ...)`, which runs plain functions on a worker thread, and race "
        "the run against the deadline."
    ),
    "deadline_blocking_model/blocked_loop": (
        "Your loop raised the deadline error only after the blocking model returned: a plain function called "
        "directly blocks the event loop's thread, so nothing else can run. Call it with `await invoke(fn, ...)`."
    ),
    "deadline_blocking_model/hung": "agent_loop never finished. " + _RACE,
    "deadline_blocking_model/*": _RACE,
    "deadline_covers_tools/*:blocking_tool": (
        "A plain `def` tool that blocks its thread must not hold up the deadline: run tools with "
        "`await invoke(run, ...)`, which runs plain functions on a worker thread, and race the run against the clock."
    ),
    "deadline_covers_tools/blocking_tool": (
        "Your loop raised the deadline error only after the blocking tool returned: a plain function called "
        "directly blocks the event loop's thread. Call it with `await invoke(run, ...)`."
    ),
    "deadline_covers_tools/*:per_step": (
        "A timeout per step (asyncio.wait_for or asyncio.timeout around each model call or tool run) lets a run of "
        "many short steps go on forever: the deadline is for the whole run, set once, and the whole run's task "
        "races it."
    ),
    "deadline_covers_tools/per_step": (
        "The run went on well past timeout_ms because each step got its own time: set the deadline once when the "
        "run starts and race the whole run against it."
    ),
    "deadline_covers_tools/ran_after_deadline": _NOTHING_AFTER,
    "deadline_covers_tools/hung": "agent_loop never finished. " + _RACE,
    "deadline_covers_tools/*": (
        "The deadline covers the tools too: race the whole run (model calls and tool runs) against the clock, "
        "not only each model call. " + _RACE
    ),
    "signal_aborted_on_deadline/signal_not_aborted": (
        "When the deadline fires, call abort(reason) on the controller whose signal you gave the model and the "
        "tools, so that they can stop their own work too (AbortController() per run; pass controller.signal)."
    ),
    "signal_aborted_on_deadline/signal_not_bool": (
        "Give the model and the tools a real signal, such as AbortController().signal, whose .aborted is False "
        "until the run is stopped and True after; not None, not a function, not the controller itself."
    ),
    "signal_aborted_on_deadline/tool_signal": (
        "Give the tools the same signal as the model (the run's own controller.signal) and abort it when the "
        "deadline fires, so that a tool still running can stop its own work."
    ),
    "signal_aborted_on_deadline/outside_signal_passed": (
        "Do not hand the caller's signal to the model and the tools: make the run's own AbortController, pass its "
        "signal, and abort it on the deadline (and when the caller's signal fires). The caller's signal is theirs; "
        "the loop only reads it."
    ),
    "signal_aborted_on_deadline/hung": "agent_loop never finished. " + _RACE,
    "signal_aborted_on_deadline/*": _RACE,
    "abort_midway/abort_identity": _IDENTITY,
    "abort_midway/*:abort_tool": (
        "The outside signal can fire while a tool runs, and the tool may ignore it: race the whole run (model "
        "calls and tool runs) against signal.wait(), then abort your own signal, cancel the task and raise "
        "signal.reason."
    ),
    "abort_midway/abort_tool": (
        "The run stopped only when the tool finished: race the whole run, tools included, against the outside "
        "signal, not only the model calls."
    ),
    "abort_midway/*:abort_model": (
        "A plain `def` model that blocks its thread must not hold up an abort: call it with `await invoke(model, "
        "...)` (a worker thread) and race the run against signal.wait()."
    ),
    "abort_midway/abort_model": (
        "The run stopped only when the blocking model returned: call plain models with `await invoke(model, ...)`, "
        "which runs them on a worker thread, so that the race can see the abort."
    ),
    "abort_midway/abort_not_passed_on": (
        "When the caller aborts, abort the run's own controller too (controller.abort(signal.reason)), so that "
        "the model and tools you gave its signal can stop their work."
    ),
    "abort_midway/ran_after_abort": _NOTHING_AFTER,
    "abort_midway/hung": (
        "agent_loop never finished after the caller aborted: the outside signal can fire at any moment, not only "
        "between steps. Race the steps' task against signal.wait() as well as the deadline; when the signal wins, "
        "abort your own signal, cancel the task and raise signal.reason."
    ),
    "abort_midway/*": (
        "The outside signal can fire at any moment, not only between steps: race the steps against "
        "signal.wait() as well as the deadline, and when it fires abort your own signal, cancel the task and "
        "raise signal.reason."
    ),
    # limits
    "context_output_cancellation/*:context": (
        _BUDGETS_FIRST + "An input of 8 characters does not fit max_chars=2: raise "
        "ContextBudgetError('context budget ...') before the first model call."
    ),
    "context_output_cancellation/*:output": (
        "Before returning the final answer, check len(text) > max_chars and raise "
        "OutputBudgetError('output budget ...'): the answer counts against the budget too."
    ),
    "context_output_cancellation/abort_identity": _IDENTITY,
    "context_output_cancellation/context_model_called": (
        "The context check comes before the model call, not after: if the history is already over max_chars, "
        "raise ContextBudgetError without calling the model."
    ),
    "context_output_cancellation/pre_aborted_model_called": (
        "Check the outside signal before anything else, before the first model call: an aborted signal means the "
        "model is never called."
    ),
    "context_output_cancellation/*:pre_aborted": (
        "Check the outside signal before anything else: if signal is not None and signal.aborted, raise "
        "signal.reason, the very error the caller gave to abort()."
    ),
    "context_counts_calls/*:count": (
        "Count the calls messages too: each {'role': 'assistant', 'calls': [...]} adds "
        "len(compact_json(calls)) characters to the context, as it does to a real model's."
    ),
    "context_counts_calls/undercount:calls": (
        "The calls messages are not counted: each {'role': 'assistant', 'calls': [...]} adds "
        "len(compact_json(calls)) characters, as it does to a real model's context. Count them with the rest."
    ),
    "context_counts_calls/undercount:results": (
        "The tool results are not counted: each {'role': 'tool', ...} message adds len(its content), the JSON "
        "text of the result. Count every message of the history, tool results included."
    ),
    "context_counts_calls/undercount:turns": (
        "Only part of the history is counted (the last message, or the last turn): the size is the sum over every "
        "message since the user's input, recounted before each model call."
    ),
    "context_counts_calls/undercount:*": (
        "Several kinds of message are not counted: the size is the input, plus each calls message as "
        "len(compact_json(calls)), plus each tool result's content, in every turn."
    ),
    "context_counts_calls/overcount": (
        "You count more than the context holds: count each message's content, and each calls message as "
        "len(compact_json(calls)); not the roles, the keys, or spaces json.dumps adds."
    ),
    # any behaviour
    "*/hung": (
        "agent_loop never finished. Look for a loop with no way out (return when the model answers 'final'), an "
        "await that can never complete, or a blocking call such as time.sleep() in async code."
    ),
    "*/leaked_tasks": (
        "agent_loop ended but left tasks running. Cancel every task you start before you return or raise "
        "(in a `finally:`), such as the steps task and the task waiting for the signal."
    ),
    "*/crashed": (
        "The behaviour could not read what agent_loop returned: return an AgentResult(text=..., history=[...], "
        "usage=Usage(...)), and let the history hold plain dicts."
    ),
    "*/raised": "agent_loop raised where this behaviour expects a run to succeed: read what happened above.",
    "*/control": (
        "Your loop refuses what this row is about, but a plain run with a valid call did not work: the tool must "
        "run, its result go back to the model tied to its call id, and the model's final text come back as "
        "result.text. Read what happened above."
    ),
    "*/wrong_class:*": (
        "You raised one of agentlab's error classes, but the one for another rule: each limit has its own "
        "(ToolBudgetError for max_calls, TurnBudgetError for max_turns, ContextBudgetError, OutputBudgetError, "
        "DeadlineError, ...). The caller catches them by class, so the class must name the rule that stopped the run."
    ),
    "*/no_error:*": "This run must fail with the error named in 'expected'; yours returned instead.",
    "*/wrong_error:*": "This run must fail with an error whose message contains the phrase in 'expected'.",
    "*/ran:*": "Nothing of a refused batch may run: do every check of the batch before running any of it.",
}

# The "recovery" step (notebook 11): a loop that gives refused batches back to the model, within max_refusals.
_NOTHING_OF_A_REFUSED_BATCH = (
    "Check the whole batch before anything runs, and return the refusal instead of running: whether the batch goes "
    "back to the model or ends the run, none of its calls runs, not even the good ones before the refused one."
)
HINTS |= {
    "zero_refusals_is_todays_contract/*": (
        "max_refusals=0 (the default) is the exercise's contract: the first refusal raises its error and the "
        "model is not asked again. Return a refusal to the model only while refusals < max_refusals."
    ),
    "refusal_answers_every_call/*": (
        "A returned refusal is the batch as proposed in the history, then one tool message per call id: the "
        "refused call's content carries str(error), the exact words the error would have raised, and each other "
        "call's says it was not run because another call of the batch was refused. Count it in usage.refusals."
    ),
    "refusal_answers_every_call/*:duplicate_id": (
        "A duplicate id cannot carry its own answer: the id is already answered. Record the refused call under an "
        "id of your own (never one the run has used) so that each call still gets exactly one tool message."
    ),
    "refusal_answers_every_call/zero_first": (
        "This row first runs the batch with max_refusals=0 to learn the error's words, and that run did not raise: "
        "with max_refusals=0 the first refusal must end the run, as in the exercise."
    ),
    "returned_batch_never_runs/*": _NOTHING_OF_A_REFUSED_BATCH,
    "zero_refusals_is_todays_contract/ran:*": _NOTHING_OF_A_REFUSED_BATCH,
    "refusal_budget_ends_the_run/ran:*": _NOTHING_OF_A_REFUSED_BATCH,
    "refusals_tie_to_usable_ids/*": (
        "Every call in the history needs a non-empty string id of its own and exactly one tool message tied to it "
        "(providers reject a transcript with an unanswered call). A missing, non-string or duplicate id gets an id "
        "the loop makes, never one the run has used; mark every id of a returned batch as used."
    ),
    "refusal_budget_ends_the_run/*": (
        "Count each returned batch; when refusals == max_refusals, the next refusal is raised as it would be "
        "without recovery (UnknownToolError, ToolArgsError, ...), not returned, and not a budget error of its own."
    ),
    "limits_are_not_refusals/*": (
        "Only a mistake the model can fix in its next proposal is returned (unknown tool, invalid args, a "
        "malformed call, a duplicate id, a repeat). max_calls, max_turns, max_chars, the deadline and an abort "
        "still end the run at once, whatever max_refusals allows."
    ),
}


_FALLBACK = "Compare 'expected' with 'what happened', then reread this behaviour's part of the workbook."


def hint_for(
    key: str,
    clue: str,
    causes: Iterable[BaseException] = (),
    happened: str = "",
    returned: Sequence[str] = (),
    warned: Sequence[str] = (),
) -> tuple[str, str]:
    """The hint for a failed behaviour: `(hint_id, text)`.

    A mistake that breaks every behaviour alike (not written yet, not async, a
    wrong signature, a result that is not an AgentResult) comes first; then the
    most specific entry of `HINTS` for the behaviour and its clue. The text is the English one, as `HINTS` holds
    it: a report's row shows it in the language in force (`_(text)`, with classroom.po).
    """
    causes = list(causes)
    if "keyword argument 'max_refusals'" in happened:  # a loop written for the workbooks, checked for recovery
        return _NO_MAX_REFUSALS
    for cause in causes:
        for kind, diagnosis in _DIAGNOSES.items():
            if isinstance(cause, kind):
                return diagnosis
    for cause in causes:
        if isinstance(cause, BaseExceptionGroup):
            return _EXCEPTION_GROUP
    if clue != "hung" and any(isinstance(cause, asyncio.CancelledError) for cause in list(causes)[1:]):
        return _SWALLOWED_CANCEL
    if "raised CancelledError" in happened:
        return _SWALLOWED_CANCEL
    # causes that cut across every row come before a row's own advice: tasks left running, a hang
    if clue == "swallowed_cancel":
        return _SWALLOWED_CANCEL
    if clue == "control":
        return "*/control", HINTS["*/control"]
    if clue.startswith("wrong_class:"):
        return "*/wrong_class:*", HINTS["*/wrong_class:*"]
    if clue == "leaked_tasks":
        return "*/leaked_tasks", HINTS["*/leaked_tasks"]
    if clue == "hung":
        entry = f"{key}/hung" if f"{key}/hung" in HINTS else "*/hung"
        return entry, HINTS[entry]
    if returned and not clue.startswith(("no_error", "wrong_error", "ran")):
        return _NOT_A_RESULT
    if clue in ("wrong_tool_message", "history", "call_order", "json_format", "overcount") and _spaced_json(happened):
        return _JSON_SPACES
    if any("never awaited" in message for message in warned):
        return _NEVER_AWAITED
    kind, _colon, detail = clue.partition(":")
    candidates = [f"{key}/{clue}"] if detail else [f"{key}/{clue}", f"{key}/*:{clue}"]
    if detail:
        candidates += [f"{key}/{kind}:*", f"{key}/*:{detail}"]
    candidates += [f"{key}/*", f"*/{clue}"]
    if detail:
        candidates.append(f"*/{kind}:*")
    for candidate in candidates:
        if candidate in HINTS:
            return candidate, HINTS[candidate]
    return "*", _FALLBACK


def _spaced_json(text: str) -> bool:
    """True if `text` shows JSON written with spaces after its colons or commas."""
    return '": ' in text or '", "' in text


# -- rendering ----------------------------------------------------------------------


def said_before(rows: Sequence[Row]) -> dict[str, str]:
    """For each failed row whose hint an earlier failed row already gives: the key of that earlier row.

    One mistake often fails several rows with the same hint (json.dumps for compact_json fails every row that
    reads a tool result): the report says that cause once, under its first row, and the others refer to it.
    """
    first: dict[str, str] = {}
    earlier: dict[str, str] = {}
    for row in rows:
        if row.passed or not row.hint:
            continue
        if row.hint in first:
            earlier[row.key] = first[row.hint]
        else:
            first[row.hint] = row.key
    return earlier


def render_text(report: Report, width: int = 99) -> str:
    """The report for a terminal: a line per behaviour; under each failure, expected, happened and the hint."""
    lines = [report.headline()]
    whole = ("missing", "delegated", "tampered", "stopped")  # verdicts on the whole submission: say them once
    if report.rows and all(row.clue in whole for row in report.rows) and len({r.happened for r in report.rows}) == 1:
        row = report.rows[0]
        labelled = ((_("problem"), row.happened), (_("hint"), row.hint))
        pad = max(8, *(len(label) + 1 for label, _text in labelled))  # English: "problem" and "hint" in 8
        for label, text in labelled:
            lines += textwrap.wrap(text, width, initial_indent=f"  {label:<{pad}} ", subsequent_indent=" " * (pad + 3))
        return "\n".join(lines)
    key_width = max((len(row.key) for row in report.rows), default=0)
    earlier = said_before(report.rows)
    for row in report.rows:
        head = f"  {'✓' if row.passed else '✗'} {row.key.ljust(key_width)}  {row.title}"
        lines += textwrap.wrap(head, width, subsequent_indent=" " * (key_width + 6), break_on_hyphens=False)
        if row.passed:
            continue
        hint = _("the same cause as for {key} above").format(key=earlier[row.key]) if row.key in earlier else row.hint
        labelled = ((_("expected"), row.expected), (_("happened"), row.happened), (_("hint"), hint))
        pad = max(9, *(len(label) + 1 for label, _text in labelled))  # English: the labels in 9, the text at 16
        for label, text in labelled:
            lines += textwrap.wrap(
                text,
                width,
                initial_indent=f"      {label:<{pad}} ",
                subsequent_indent=" " * (pad + 7),
                break_long_words=True,
                break_on_hyphens=False,
            ) or [f"      {label}"]
    return "\n".join(lines)


# Inline styles (agentlab/lab/_look.py says why): the saved report looks the same in an untrusted notebook.
# Laid out for reading: a line per behaviour, and under a failure its expected / what happened / hint as labelled
# lines across the whole width; code in `backticks` set as code; a hint said once, then referred to.
_CELL = f"padding:5px 8px;vertical-align:top;text-align:left;border:none;border-top:1px solid {look.LINE}"
_LABEL = f"padding:1px 10px 1px 0;vertical-align:top;text-align:left;border:none;white-space:nowrap;{look.MUTED}"
_TEXT = "padding:1px 0;vertical-align:top;text-align:left;border:none;overflow-wrap:break-word"
_CODE = f"{look.MONO};font-size:12px;background:rgba(128,128,128,.16);border-radius:3px;padding:0 3px"


def _prose_html(text: str) -> str:
    """Escaped text with each `span in backticks` shown as code."""
    return re.sub(r"`([^`\n]+)`", lambda m: f"<code{look.attr(_CODE)}>{m.group(1)}</code>", html.escape(text))


def _details_html(lines: Sequence[tuple[str, str]]) -> str:
    rows = "".join(
        f"<tr{look.attr(look.ROW)}><td{look.attr(_LABEL)}>{label}</td><td{look.attr(_TEXT)}>{text}</td></tr>"
        for label, text in lines
    )
    return f"<table{look.attr('border-collapse:collapse;background:transparent;margin:4px 0 2px 0')}>{rows}</table>"


def render_html(report: Report) -> str:
    """The report for Jupyter: a line per behaviour; under each failure, what was expected, what happened, a hint."""
    e = html.escape
    colour = look.GREEN if report.passed else look.RED
    head_css = look.attr(f"font-weight:bold;margin:2px 0 6px;color:{colour}")
    head = f"<div class='head {'ok' if report.passed else 'bad'}'{head_css}>{e(report.headline())}</div>"
    box = look.attr(f"{look.SANS};max-width:72em;line-height:1.45;text-align:left")
    whole = ("missing", "delegated", "tampered", "stopped")  # verdicts on the whole submission: say them once
    rows_ = report.rows
    if rows_ and all(row.clue in whole for row in rows_) and len({row.happened for row in rows_}) == 1:
        details = _details_html(
            [(e(_("problem")), _prose_html(rows_[0].happened)), (e(_("hint")), _prose_html(rows_[0].hint))]
        )
        return f"<div class='agentlab-check'{box}>{head}{details}</div>"
    rows, earlier = [], said_before(rows_)
    for row in rows_:
        mark_colour = look.GREEN if row.passed else look.RED
        mark_css = look.attr(f"color:{mark_colour}")
        mark = f"<span class='{'ok' if row.passed else 'bad'}'{mark_css}>{'✓' if row.passed else '✗'}</span>"
        key = f"<code class='key'{look.attr(f'{look.MONO};font-size:12px;{look.MUTED}')}>{e(row.key)}</code>"
        body = f"<span{look.attr('font-weight:bold' if not row.passed else '')}>{e(row.title)}</span> &nbsp;{key}"
        cell = _CELL
        if not row.passed:
            hint = (
                e(_("the same cause as for {key} above")).format(
                    key=f"<code{look.attr(_CODE)}>{e(earlier[row.key])}</code>"
                )
                if row.key in earlier
                else _prose_html(row.hint)
            )
            body += _details_html(
                [
                    (e(_("expected")), _prose_html(row.expected)),
                    (e(_("what happened")), _prose_html(row.happened)),
                    (e(_("hint")), hint),
                ]
            )
            cell += f";{look.BAD_BACKGROUND.replace('.16', '.08')}"
        mark_cell = look.attr(f"{cell};width:1.5em;font-weight:bold")
        rows.append(
            f"<tr class='{'passed' if row.passed else 'failed'}'{look.attr(look.ROW)}>"
            f"<td class='mark'{mark_cell}>{mark}</td><td{look.attr(cell)}>{body}</td></tr>"
        )
    return f"<div class='agentlab-check'{box}>{head}<table{look.attr(look.TABLE)}>{''.join(rows)}</table></div>"


__all__ = [
    "BOUND_S",
    "HINTS",
    "NotAsyncError",
    "Report",
    "Row",
    "SignatureError",
    "check",
    "hint_for",
    "load",
    "main",
    "render_html",
    "render_text",
    "unloadable",
]

# -- hints of the "writes" step (workbook 7): a self-contained block, like the step's behaviours ---------------------
HINTS.update(
    {
        "writes_need_approval/*:no_policy": (
            "Before anything of a batch runs, look for writes (tools with writes=True): if there is one and "
            "approve is None, raise ApprovalError('approval required: ...'). Check it with the rest of the batch, "
            "so that a read proposed before the write does not run either."
        ),
        "writes_need_approval/no_policy": (
            "A batch refused for want of approval ends the run: raise, do not hand the refusal back to the model."
        ),
        "writes_need_approval/*:reads_need_none": (
            "Only writes need a policy: a run whose tools only read works with approve=None, as in workbooks 1-6."
        ),
        "approval_before_each_write/no_key": (
            "Pass an approved write's run its call as the third argument: invoke(checked.tool.run, checked.value, "
            "signal, ToolCall(checked.id, checked.name, copy of checked.args)). A store makes the write's "
            "idempotency key from the call: by default its call id within the run, which knows the same call "
            "played back; or the application's key (an order number), which knows the same write asked again."
        ),
        "approval_before_each_write/approve_ids": (
            "Ask the policy once per write, with that write's own call: approve(ToolCall(checked.id, checked.name, "
            "copy of checked.args), signal). Never ask about a read, and never skip a write."
        ),
        "approval_before_each_write/approve_order": (
            "Ask for approval inside the loop over the batch, just before each write runs, not for all the writes "
            "up front: an answer is about the world as it is when the write runs, after the writes before it."
        ),
        "approval_before_each_write/write_order": (
            "Run the calls of a batch one at a time, in the order the model gave them, each to its end before the "
            "next (await it; no gather, no tasks left running)."
        ),
        "approval_before_each_write/approve_call": (
            "The policy decides from what the model proposed: give it ToolCall(id, name, args) with the call's "
            "id, its tool name and a copy of the args as proposed (not what validate returned)."
        ),
        "approval_before_each_write/policy_tampered": (
            "The write runs with what validate returned (checked.value); the policy gets a deep copy of the args, "
            "so whatever it does to its copy cannot change the write."
        ),
        "approval_before_each_write/*:raised": (
            "Accept every answer a policy may give: True, or Approval(True); a plain function policy too (call it "
            "with `invoke`). Then pass the write's run its ToolCall as the third argument: invoke(run, value, signal, "
            "tool_call). A store makes the write's idempotency key from it (notebook 09c)."
        ),
        "denial_is_the_result/denied_ran": (
            "A denied write must not run: on False or Approval(False, reason), skip run and go on with the batch."
        ),
        "denial_is_the_result/*:denial_raised": (
            "A denial is not an error: it is that call's result. Append {'role': 'tool', 'call_id': checked.id, "
            "'content': compact_json({'denied': True, 'reason': ...})} and go on with the batch and the run."
        ),
        "denial_is_the_result/denial_message": (
            "Every call of a batch gets a tool message with its own call_id, a denied write included: the model "
            "must learn what became of each call it proposed."
        ),
        "denial_is_the_result/denial_content": (
            "The content of a denied write's message is compact_json({'denied': True, 'reason': reason}), with the "
            "policy's reason, or a reason of your own (never empty) when the policy said a plain False."
        ),
        "denial_is_the_result/*:odd_answer": (
            "Only True, False and an Approval are answers. Anything else ('yes', None) means the policy is broken: "
            "raise ApprovalError('approval failed: ...') and write nothing. Never decide by truthiness."
        ),
        "write_budget_checked_first/*:over": (
            "max_writes is checked with the rest of the batch, before anything runs and before any policy is asked: "
            "if writes done so far + writes in this batch > max_writes, raise WriteBudgetError('write budget "
            "exhausted: ...'). Count over the whole run, not per batch."
        ),
        "write_budget_checked_first/*:denied_counted": (
            "Count a write when it is approved, not when it is proposed: a denied write wrote nothing, so it does "
            "not use the write budget."
        ),
        "write_budget_checked_first/*:denial_raised": (
            "The run ended at the denied write. A denial is not an error: it is that call's result, and the run "
            "goes on (see the row about denials)."
        ),
        "write_budget_checked_first/*:reads_counted": "Only writes count against max_writes; reads count in max_calls.",
        "write_budget_checked_first/*:exact": (
            "Exactly max_writes writes fit: refuse only when writes done + writes asked > max_writes (not >=)."
        ),
        "stopped_write_settles/no_grace": (
            "When the deadline or an abort stops a run while a write is in flight, abort the signal and then wait "
            "for the write (up to WRITE_GRACE_MS) before raising: it needs a moment to commit or roll back, and the "
            "run must not end while it is half done. Keep track of the write in flight in a set the race can see."
        ),
        "stopped_write_settles/slow_grace": (
            "Wait for the write in flight with a bound (asyncio.wait({task}, timeout=WRITE_GRACE_MS / 1000)), and "
            "stop waiting as soon as it has settled."
        ),
        "stopped_write_settles/abort_reason": (
            "An abort from outside ends the run with the abort's own reason, the very exception given to abort(), "
            "also when a write had to settle first."
        ),
        "stopped_write_settles/*:deadline": (
            "The deadline holds with writes too: the race raises DeadlineError when it fires, whether the run is "
            "waiting for the model, a tool, a write or the approval policy."
        ),
        "stopped_write_settles/*:approval_deadline": (
            "Waiting for the policy counts against the deadline: the race stops the run even while a person (or a "
            "slow policy) is still deciding."
        ),
        "stopped_write_settles/late_write": (
            "Nothing starts once the run is stopped: after the policy answers, check the signal before running the "
            "write, and stop the steps when the race gives up on them."
        ),
    }
)
