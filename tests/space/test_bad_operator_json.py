"""Bad operator JSON and replay paths: an OperatorFormatError naming the fault (nesting, encoding, unreadable
values, a path that is no list of child keys), never a crash; a good operator still round-trips."""
from __future__ import annotations

import json

import pytest
from _syno_helpers import conv_space

from syno_automl import Operator, OperatorFormatError

JSONS = [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (b"\x80\x81{}", "not valid UTF-8: byte 0"),
    ('{"format": "syno-operator/1", "hash": ' + "1" * 5000 + "}", "unreadable value"),
    ("1" * 5000, "unreadable value"),
    ("{", "does not parse"),
    (12, "must be a str or bytes"),
    ('{"format": "syno-operator/1", "path": "x", "hash": "0"}', "needs a 'path'"),
    # a JSON escape of half a UTF-16 pair parses into a lone surrogate, which pybind11 refused with a TypeError
    ('{"format": "syno-operator/1", "path": ["0123456789abcdef", "\\udcff"], "hash": "0"}',
     "operator JSON's 'path' step 1 holds a lone surrogate '\\udcff' at character 0"),
    ('{"format": "syno-operator/1", "path": [], "hash": "ab\\ud800"}', "operator JSON's 'hash' holds a lone surrogate"),
]


@pytest.mark.parametrize("text, message", JSONS, ids=[ascii(j[0])[:24] for j in JSONS])
def test_bad_operator_json_is_an_operator_format_error(text, message: str) -> None:
    with pytest.raises(OperatorFormatError) as info:
        Operator.from_json(conv_space(), text)
    assert message in str(info.value)


def test_json_round_trip_still_works() -> None:
    s = conv_space()
    op = s.sample(1, seed=2)[0]
    assert Operator.from_json(s, op.to_json()) == op
    assert Operator.from_json(s, op.to_json().encode()) == op


# ----------------------------------------------------------------------------------------------------------
# replay(): keys as a JSON file may hold them
# ----------------------------------------------------------------------------------------------------------

LONG = "x" * 100_000


@pytest.mark.parametrize("path, message", [
    ([1, 2], "step 0 of the replay path: a child key is a string of 16 hex digits, got 1 (a int)"),
    (json.loads('["0123456789abcdef", null]'), "step 1 of the replay path: a child key is a string of 16 hex digits, "
                                                "got None (a NoneType)"),
    ("0123456789abcdef", "a replay path is a list of child keys"),
    (None, "a replay path is a list of child keys"),
    (["\x00" + LONG], "step 0 (key '\\x00xxx"),  # a string key that is no child: echoed capped, NUL escaped
    (["\udcff"], "step 0 of the replay path: a child key is a string of 16 hex digits, got '\\udcff' (holding a lone "
                 "surrogate"),
])
def test_replay_with_keys_that_are_not_strings_is_an_operator_format_error(path, message: str) -> None:
    with pytest.raises(OperatorFormatError) as info:
        conv_space(max_depth=3).replay(path)
    assert message in str(info.value) and len(str(info.value)) < 300
