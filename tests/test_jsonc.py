"""compact_json matches JavaScript's JSON.stringify; copy_json copies and refuses non-JSON."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlab.jsonc import MAX_DEPTH, NotJSONError, compact_json, copy_json

CASES = [
    ({"id": "A"}, '{"id":"A"}'),
    ([1, 2.5, None, True, False], "[1,2.5,null,true,false]"),
    ({"city": "Kraków", "emoji": "🙂"}, '{"city":"Kraków","emoji":"🙂"}'),
    ({"t": 18.0, "z": -0.0}, '{"t":18,"z":0}'),
    (
        [1e21, 1e20, 1.5e16, 1e-7, 0.000001, 123.456, 5e-324],
        "[1e+21,100000000000000000000,15000000000000000,1e-7,0.000001,123.456,5e-324]",
    ),
    ('line\nbreak\t"quoted" \\ \x01', '"line\\nbreak\\t\\"quoted\\" \\\\ \\u0001"'),
    ("lone \ud800", '"lone \\ud800"'),
    ((1, (2,)), "[1,[2]]"),
    ({}, "{}"),
]


@pytest.mark.parametrize(("value", "text"), CASES)
def test_compact_json_writes_what_javascript_writes(value, text) -> None:
    assert compact_json(value) == text


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({1, 2}, "a set"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        ({"a": [0, b"x"]}, "at .a[1]"),
        ({1: 2}, "key"),
    ],
)
def test_non_json_is_refused_with_what_and_where(value, where) -> None:
    for function in (compact_json, copy_json):
        with pytest.raises(NotJSONError, match=where.replace("[", r"\[")):
            function(value)


def test_nesting_is_bounded_and_cycles_are_caught() -> None:
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    cycle: list = []
    cycle.append(cycle)
    for value in (deep, cycle):
        with pytest.raises(NotJSONError, match="levels deep"):
            compact_json(value)
        with pytest.raises(NotJSONError, match="levels deep"):
            copy_json(value)


def test_copy_json_shares_nothing_and_normalises_subclasses() -> None:
    class Name(str):
        def __str__(self) -> str:
            return "disguised"

    original = {"a": [1, {"b": "c"}], "t": (1, 2), "n": Name("real")}
    copied = copy_json(original)
    assert copied == {"a": [1, {"b": "c"}], "t": [1, 2], "n": "real"}
    assert type(copied["n"]) is str
    copied["a"][1]["b"] = "changed"
    assert original["a"][1]["b"] == "c"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_compact_json_round_trips_through_the_standard_parser(value) -> None:
    # JavaScript writes a large float like 5.9e16 as digits, which Python reads back as an int
    assert json.loads(compact_json(value), parse_int=float) == value
    assert copy_json(value) == value


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: cannot compare with JSON.stringify")
@settings(max_examples=1, deadline=None)
@given(st.lists(json_values, min_size=300, max_size=300))
def test_compact_json_is_byte_identical_to_node(values) -> None:
    script = (
        "let s='';process.stdin.on('data',d=>s+=d)"
        ".on('end',()=>{for(const v of JSON.parse(s))console.log(JSON.stringify(v))})"
    )
    payload = json.dumps(values, ensure_ascii=True)  # ASCII transport; JSON.parse restores the text exactly
    done = subprocess.run(["node", "-e", script], input=payload, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [compact_json(v) for v in values]
