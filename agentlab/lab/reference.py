"""The exercise's seven reference tests as written (JavaScript, node:test), beside their Python ports.

    from agentlab.lab.reference import side_by_side
    side_by_side("unknown_tool")      # a check cell shows the original test and the behaviour that ports it

Its headings are in the language in force (agentlab.i18n); the code, JavaScript and Python, is shown as it is.

The JavaScript is quoted from the exercise (`reference.test.ts`), laid out one
statement to a line; the Python is the behaviour itself, read from
`agentlab.behaviours` when shown, so what a learner reads is what runs. The
ports check more than the originals (more names, plain `def` callees, the
exact error class): the originals' assertions are where each port begins.
"""

from __future__ import annotations

import html
import inspect
from dataclasses import dataclass
from typing import Any

from agentlab import behaviours
from agentlab.errors import ConfigError
from agentlab.i18n import _
from agentlab.lab import _look as look

# The renames from the JavaScript (callId to call_id, maxTurns to max_turns, ...) are tabled in notebooks/cheatsheet.
JAVASCRIPT: dict[str, str] = {
    "result_reaches_model": """\
test('agent: a tool result with the right callId reaches the model', async () => {
  let n = 0;
  const result = await agentLoop('question', async messages => {
    if (n++ === 0) return { kind: 'tools', calls: [{ id: 'c1', name: 'lookup', args: { id: 'A' } }] };
    assert.deepEqual(messages.at(-1), { role: 'tool', callId: 'c1', content: '{"id":"A"}' });
    return { kind: 'final', text: 'done' };
  }, { lookup: { validate: parseLookupArgs, run: async x => parseLookupArgs(x) } });
  assert.equal(result.text, 'done');
});""",
    "unknown_tool": """\
test("agent: a bad name, including an inherited one, doesn't run a tool", async () => {
  for (const name of ['deleteEverything', 'toString']) {
    await assert.rejects(
      agentLoop('q', async () => ({ kind: 'tools', calls: [{ id: '1', name, args: {} }] }), {}),
      /unknown tool/);
  }
});""",
    "invalid_args_never_run": """\
test("agent: an invalid schema doesn't call run", async () => {
  let ran = false;
  await assert.rejects(
    agentLoop('q', async () => ({ kind: 'tools', calls: [{ id: '1', name: 'lookup', args: { id: 7 } }] }),
      { lookup: { validate: parseLookupArgs, run: async () => { ran = true; } } }),
    /args/);
  assert.equal(ran, false);
});""",
    "tool_and_turn_budgets": """\
test('agent: tool-call limit and turn limit', async () => {
  const model = async () => ({ kind: 'tools',
    calls: [{ id: String(Math.random()), name: 'lookup', args: { id: 'A' } }] });
  const tools = { lookup: { validate: parseLookupArgs, run: async () => ({}) } };
  await assert.rejects(agentLoop('q', model, tools, { maxCalls: 0 }), /tool budget/);
  await assert.rejects(agentLoop('q', model, tools, { maxTurns: 1 }), /turn budget/);
});""",
    "duplicate_call_id": """\
test('agent: a repeated call ID is rejected', async () => {
  await assert.rejects(
    agentLoop('q', async () => ({ kind: 'tools', calls: [{ id: 'same', name: 'lookup', args: { id: 'A' } }] }),
      { lookup: { validate: parseLookupArgs, run: async () => ({}) } }),
    /duplicate call id/);
});""",
    "deadline_ignoring_signal": """\
test('agent: the deadline works even with an adapter that ignores the signal', async () => {
  await assert.rejects(agentLoop('q', async () => new Promise(() => {}), {}, { timeoutMs: 15 }), /deadline/);
});""",
    "context_output_cancellation": """\
test('agent: context, output and cancellation have hard limits', async () => {
  await assert.rejects(
    agentLoop('too long', async () => ({ kind: 'final', text: 'a' }), {}, { maxChars: 2 }), /context budget/);
  await assert.rejects(
    agentLoop('q', async () => ({ kind: 'final', text: 'too long' }), {}, { maxChars: 2 }), /output budget/);
  const c = new AbortController(); c.abort(new Error('stop'));
  await assert.rejects(
    agentLoop('q', async () => ({ kind: 'final', text: 'ok' }), {}, { signal: c.signal }), /stop/);
});""",
}


@dataclass(frozen=True)
class SideBySide:
    """One reference test: the JavaScript original and the Python behaviour that ports it."""

    key: str
    javascript: str
    python: str
    where: str  # the file and function of the Python port

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def text(self) -> str:
        rule = "-" * 40
        original = _("The exercise's test (JavaScript)")
        port = _("Its Python port ({where})").format(where=self.where)
        return f"{original}\n{rule}\n{self.javascript}\n\n{port}\n{rule}\n{self.python}"

    def html(self) -> str:
        pre = f"{look.MONO};font-size:12px;white-space:pre;overflow-x:auto;margin:4px 0 0;padding:6px 8px"
        pre += f";border:1px solid {look.LINE};border-radius:4px;background:transparent"

        # Each column wants 52em: side by side on a wide screen, one above the other on a laptop's (1280 px with
        # the file browser open), where two half-width columns hid most of each line behind a scroll bar.
        def column(title: str, code: str) -> str:
            return (
                f"<div{look.attr('flex:1 1 52em;min-width:0')}>"
                f"<div{look.attr(f'{look.SANS};font-weight:bold')}>{html.escape(title)}</div>"
                f"<pre{look.attr(pre)}>{html.escape(code)}</pre></div>"
            )

        return (
            f"<div class='agentlab-reference'{look.attr('display:flex;flex-wrap:wrap;gap:12px;max-width:100%')}>"
            f"{column(_('The exercise’s test (JavaScript)'), self.javascript)}"
            f"{column(_('Its Python port ({where})').format(where=self.where), self.python)}</div>"
        )


def side_by_side(key: str) -> SideBySide:
    """The reference test `key` (one of the seven) in JavaScript, beside the behaviour that ports it."""
    if key not in JAVASCRIPT:
        raise ConfigError(f"{key!r} is not one of the seven reference tests: {', '.join(JAVASCRIPT)}")
    check = behaviours.get(key).check
    module = check.__module__.replace(".", "/") + ".py"  # no line number: it would move with every edit
    return SideBySide(key, JAVASCRIPT[key], inspect.getsource(check).rstrip(), f"{module}, {check.__name__}")


__all__ = ["JAVASCRIPT", "SideBySide", "side_by_side"]
