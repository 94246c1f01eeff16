"""Reading and describing values the loop did not make.

A model, a tool and an approval policy are code the loop does not own, and
what they hand back may be hostile, by accident or on purpose: an object
whose `__str__` or `__repr__` raises, a `str` subclass whose `__len__` lies
to the context budget, an `int` subclass that is not the number it prints,
a batch of a million calls. The loop must still refuse it with a clear error.
So it reads such values with the base types' own methods (`str.__str__(x)`,
`int.__int__(x)`, `dict.items(x)`), which run none of the value's code, and
describes them in bounded text that cannot raise.

None of this is needed to understand the loop: read `agentlab/loop.py` first.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from typing import Any

from agentlab.errors import ConfigError
from agentlab.jsonc import copy_json, glimpse


def readable(show: Callable[[Any], str], value: Any) -> str:
    """`str` or `repr` of something a model or tool made: that may raise too, and must not escape."""
    try:
        return show(value)
    except Exception:
        return f"(a {type(value).__name__} that cannot be shown)"


def describe(error: BaseException) -> str:
    """An exception as "TypeName: message", however its `__str__` behaves."""
    text = readable(str, error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def show(value: Any) -> str:
    """A value as a short glimpse and its type: bounded, and runs none of the value's code."""
    return f"{glimpse(value, 77)} ({type(value).__name__})"


def args_as_text(value: Any) -> str:
    """Why arguments sent as a string are not a dict: the model's commonest mistake, said so it can fix it.

    A real model writes its arguments as text, and often breaks it (cut off, a missing comma); the
    parser's own words, with the position, go back to the model with the refusal.
    """
    if type(value) is not str or len(value) > 100_000:  # a huge text is not parsed only to describe it
        return ""
    try:
        parsed = json.loads(value)
    except ValueError as error:
        return f": text that is not JSON ({error})"
    if isinstance(parsed, dict):
        return ": a JSON object sent as text (decode it into a dict)"
    return f": JSON text of a {type(parsed).__name__}, not of an object"


def keys(mapping: Any) -> list[str]:
    """The keys of a dict the loop refuses, sorted, for its error message."""
    try:
        return sorted(repr(key) if not isinstance(key, str) else key for key in mapping)
    except Exception:
        return ["(unreadable)"]


def safe_copy(value: Any) -> Any:
    """A copy of a rejected decision for the error and the trace; a bounded picture of it if not JSON."""
    if value is None:
        return None
    try:
        return copy_json(value)
    except Exception:
        return glimpse(value, 2000)


def whole_number(name: str, value: Any) -> int:
    """A limit as a plain int (an int subclass is read with int's own method: it cannot lie)."""
    plain = int.__int__(value) if isinstance(value, int) and not isinstance(value, bool) else -1
    if plain < 0:
        raise ConfigError(f"{name} must be a whole number >= 0, got {show(value)}")
    return plain


def milliseconds(name: str, value: Any) -> float:
    """Milliseconds as a plain float; 10**400 cannot be one, and is refused like infinity."""
    plain = math.nan
    if isinstance(value, int) and not isinstance(value, bool):
        whole = int.__int__(value)
        plain = float(whole) if whole.bit_length() <= 1000 else math.inf
    elif isinstance(value, float):
        plain = float.__float__(value)
    if not (math.isfinite(plain) and plain >= 0):
        raise ConfigError(f"{name} must be a finite number of milliseconds >= 0, got {show(value)}")
    return plain


def token_counts(value: Any) -> bool:
    """A decision's optional "usage": exactly input_tokens and output_tokens, whole numbers >= 0."""
    return (
        isinstance(value, dict)
        and set(value) == {"input_tokens", "output_tokens"}
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value.values())
    )


def proposed_calls(decision: Any) -> int | None:
    """How many calls a decision shaped {"kind": "tools", "calls": [...]} proposes; None for any other.

    Read with the base types' own methods, without copying the decision or
    running any of its code, so that a batch of a million calls is refused
    for its length at the cost of a few steps.
    """
    if not issubclass(type(decision), dict) or dict.__len__(decision) != 2:
        return None
    fields = {key: value for key, value in dict.items(decision) if type(key) is str}
    kind, calls = fields.get("kind"), fields.get("calls")
    if not (isinstance(kind, str) and str.__eq__(kind, "tools")):
        return None
    if issubclass(type(calls), list):
        return list.__len__(calls)
    return tuple.__len__(calls) if issubclass(type(calls), tuple) else None


def first_calls(decision: Any, count: int) -> Any:
    """A refused batch, as its first `count` calls (copied safely): all the error needs to show."""
    calls = next(value for key, value in dict.items(decision) if type(key) is str and key == "calls")
    items = list.__iter__(calls) if isinstance(calls, list) else tuple.__iter__(calls)
    return {"kind": "tools", "calls": [safe_copy(call) for call in itertools.islice(items, count)]}


__all__ = [
    "describe",
    "first_calls",
    "keys",
    "milliseconds",
    "proposed_calls",
    "readable",
    "safe_copy",
    "show",
    "token_counts",
    "whole_number",
]
