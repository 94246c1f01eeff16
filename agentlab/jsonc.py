"""JSON at the trust boundary: compact text like JavaScript's, and safe copies.

Two jobs, one walk over the data each:

* `compact_json(value)` writes the text a tool result goes back as. It is
  byte-identical to JavaScript's `JSON.stringify` for ordinary data: no spaces,
  non-ASCII kept as is, numbers written the way JavaScript writes them
  (`18.0` -> `18`, `1e-7` stays `1e-7`), NaN and Infinity refused.
* `copy_json(value)` makes an independent deep copy of JSON data (tuples become
  lists), so that what the loop validated cannot be changed behind its back.

Anything that is not JSON (a set, bytes, NaN, an arbitrary object, a non-string
dict key, nesting deeper than `MAX_DEPTH`) raises `NotJSONError`, a
`ValueError` whose message says what and where (`at [2].items`).
"""

from __future__ import annotations

import re
from json.encoder import encode_basestring
from typing import Any

MAX_DEPTH = 200


class NotJSONError(ValueError):
    """The value cannot be written as JSON; the message says what and where."""

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem, self.path = problem, path
        super().__init__(f"{problem} at {path}" if path else problem)

    def inside(self, step: str) -> NotJSONError:
        """The same problem, one level further out (for the message's path)."""
        return NotJSONError(self.problem, step + self.path)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(text: str) -> str:
    """A JSON string; lone surrogates are escaped, as JavaScript does."""
    quoted = encode_basestring(text)
    if not text.isascii() and _SURROGATE.search(quoted):
        quoted = _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)
    return quoted


def _step(key: Any) -> str:
    return f"[{key}]" if type(key) is int else f".{key}"


def _number(value: float) -> str:
    """Write a float as JavaScript's Number.prototype.toString does."""
    if value != value or value in (float("inf"), float("-inf")):
        raise NotJSONError(f"{value!r} is not JSON (JSON has no NaN or Infinity)")
    if value == 0:
        return "0"
    text = repr(value)
    sign = "-" if text[0] == "-" else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + body


_TOO_DEEP = f"value nested more than {MAX_DEPTH} levels deep (or circular)"


def _key(key: Any) -> str:
    if type(key) is not str:
        raise NotJSONError(f"dict key {_shown(key)} is not a string; JSON keys are strings")
    return key


def _shown(value: Any) -> str:
    """A short, safe picture of a value that is not JSON (no code of the value runs: see `glimpse`)."""
    return glimpse(value, 60)


def glimpse(value: Any, limit: int = 200) -> str:
    """A repr-like picture of any value, at most about `limit` characters, that runs none of its code.

    For messages and for a refused decision that is not JSON: `repr` would run
    the value's own `__repr__` (which may raise, sleep or never end) and its
    cost would grow with the value's size. Plain data is shown as Python would
    show it; anything else as `<a TypeName>`.
    """
    parts: list[str] = []
    budget = [max(8, limit)]

    def put(text: str) -> bool:
        parts.append(text[: budget[0]])
        budget[0] -= len(text)
        return budget[0] > 0

    def walk(item: Any, depth: int) -> bool:
        kind = type(item)
        if item is None or kind is bool or kind is float:
            return put(float.__repr__(item) if kind is float else repr(item))
        if kind is int:
            return put(int.__repr__(item) if item.bit_length() < 1000 else "<an int of hundreds of digits>")
        if kind is str:
            return put(repr(item[: budget[0]]) + ("…" if len(item) > budget[0] else ""))
        if depth > 20 or not issubclass(kind, (dict, list, tuple)):
            return put(f"<a {kind.__name__}>")
        if issubclass(kind, dict):
            opened, closed, items = "{", "}", dict.items(item)
        else:
            opened, closed = ("[", "]") if issubclass(kind, list) else ("(", ")")
            items = list.__iter__(item) if issubclass(kind, list) else tuple.__iter__(item)
        if not put(opened):
            return False
        for index, entry in enumerate(items):
            if (index and not put(", ")) or budget[0] <= 0:
                return False
            if issubclass(kind, dict):
                key, entry = entry
                if not (walk(key, depth + 1) and put(": ")):
                    return False
            if not walk(entry, depth + 1):
                return False
        return put(closed)

    if not walk(value, 0):
        parts.append("…")
    return "".join(parts)


def _integer(value: int) -> str:
    """An int as JSON text; one with more digits than Python will write is refused."""
    try:
        return int.__repr__(value)
    except ValueError:  # over sys.get_int_max_str_digits() digits
        raise NotJSONError("an int with thousands of digits is not JSON (JavaScript could not read it)") from None


def compact_json(value: Any) -> str:
    """Return `value` as compact JSON text, exactly as `JSON.stringify` would."""
    return _write(value, 0)


def _write(value: Any, depth: int) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return _integer(value)
    if kind is float:
        return _number(value)
    if depth >= MAX_DEPTH:
        raise NotJSONError(_TOO_DEEP)
    if kind is dict or kind is _Items:
        members = []
        for key, item in value.items() if kind is dict else value.items:
            try:
                members.append(f"{_string(_key(key))}:{_write(item, depth + 1)}")
            except NotJSONError as error:
                raise error.inside(_step(key if type(key) is str else _shown(key))) from None
        return "{" + ",".join(members) + "}"
    if kind is list or kind is tuple:
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_write(item, depth + 1))
            except NotJSONError as error:
                raise error.inside(_step(index)) from None
        return "[" + ",".join(items) + "]"
    return _write(_plain(value), depth)


def copy_json(value: Any) -> Any:
    """Return an independent deep copy of JSON data; raise `NotJSONError` otherwise."""
    return _copy(value, 0)


def _copy(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if value.bit_length() > 10_000:  # only an int of thousands of digits can fail to be written
            _integer(value)
        return value
    if kind is float:
        _number(value)
        return value
    if depth >= MAX_DEPTH:
        raise NotJSONError(_TOO_DEEP)
    if kind is dict or kind is _Items:
        copied = {}
        for key, item in value.items() if kind is dict else value.items:
            try:
                copied[_key(key)] = _copy(item, depth + 1)
            except NotJSONError as error:
                raise error.inside(_step(key if type(key) is str else _shown(key))) from None
        return copied
    if kind is list or kind is tuple:
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_copy(item, depth + 1))
            except NotJSONError as error:
                raise error.inside(_step(index)) from None
        return items
    return _copy(_plain(value), depth)


def _plain(value: Any) -> Any:
    """Subclasses of the JSON types become their base type; anything else is refused.

    The base type's own methods are used, and no code of the value runs (not
    even a key's `__hash__`: a dict's items are read, not rebuilt), so a
    subclass can neither disguise itself nor stall the thread that reads it.
    """
    kind = type(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, dict):
        return _Items(dict.items(value))
    if issubclass(kind, list):
        return list(list.__iter__(value))
    if issubclass(kind, tuple):
        return list(tuple.__iter__(value))
    raise NotJSONError(f"a {kind.__name__} is not JSON")


class _Items:
    """A dict subclass's items, read with dict's own method: the keys are checked before anything hashes them."""

    __slots__ = ("items",)

    def __init__(self, items: Any) -> None:
        self.items = items


def sorted_keys(value: Any) -> Any:
    """JSON data with every dict's keys sorted, so that {a, b} and {b, a} compare as the same."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


__all__ = ["MAX_DEPTH", "NotJSONError", "compact_json", "copy_json", "glimpse", "sorted_keys"]
