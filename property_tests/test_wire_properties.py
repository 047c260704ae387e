"""Properties of the wire format: exact round trips, and WireError as the only failure."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactgrade import strategies as egst
from exactgrade import wire


@given(egst.values())
def test_round_trip_is_type_and_value_identical(value: object) -> None:
    text = wire.encode(value)
    assert egst.typed_equal(wire.decode(text), value)
    assert wire.encode(wire.decode(text)) == text  # canonical: re-encoding gives the same bytes


@given(egst.answers())
def test_answers_round_trip(answer: dict) -> None:
    assert egst.typed_equal(wire.decode(wire.encode(answer)), answer)


def _decode_fails_cleanly(text: object) -> None:
    try:
        wire.decode(text)  # type: ignore[arg-type]
    except wire.WireError as error:
        assert str(error) and "\n" not in str(error)


@given(st.text(max_size=300))
def test_decode_of_arbitrary_text_raises_only_wire_error(text: str) -> None:
    _decode_fails_cleanly(text)


@given(st.binary(max_size=300))
def test_decode_of_arbitrary_bytes_raises_only_wire_error(data: bytes) -> None:
    _decode_fails_cleanly(data)


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=10), st.sampled_from(["$float", "$frac", "$sym", "$tensor", "nan", "1/0",
                                                     "Integer", "Pow", "float32", "int8", "bool"])),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["$float", "$frac", "$sym", "$tensor", "dtype", "shape", "data",
                                         "$$x", "$", "a"]), children, max_size=3),
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_decode_of_arbitrary_tagged_json_raises_only_wire_error(tree: object) -> None:
    _decode_fails_cleanly(json.dumps(tree))


@given(st.data(), egst.values(max_leaves=6))
def test_decode_of_mutated_payloads_raises_only_wire_error(data: st.DataObject, value: object) -> None:
    text = wire.encode(value)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        piece = data.draw(st.sampled_from(list('[]{}",:0-9e.$/') + ["-", "1e999", "NaN", "\\u", "true"]))
        if action == "delete":
            text = text[:position] + text[position + 1:]
        elif action == "insert":
            text = text[:position] + piece + text[position:]
        elif action == "replace":
            text = text[:position] + piece + text[position + 1:]
        else:
            text = text[:position] + text[position:position + 8] + text[position:]
    _decode_fails_cleanly(text)


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_deep_nesting_is_refused_before_parsing(depth: int) -> None:
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.decode("[" * depth + "]" * depth)
