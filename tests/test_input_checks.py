"""Issue 26, item 5 (and 3): nonsense input to the library is a clear SynoError at once, never a silent result.

Tables, one row per example: enumerate()'s arguments, replay paths read from JSON, echoed fields (capped, NULs
escaped) in the Python checks and in the native core's messages, and an export path in a missing folder.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from syno_automl.errors import EmptySpaceError

from syno_automl import OperatorFormatError, OperatorSpace, SpecError, SynoError, _native
from syno_automl.echo import LIMIT, shown
from syno_automl.errors import NotAChildError, NotFinalError, OptionError, OptionTypeError, OutputPathError

ARGS = {"input_shape": "[N, C_in, H, W]", "output_shape": "[N, C_out, H, W]",
        "primary": ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], "coefficients": ["k=3: 2"],
        "mappings": [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], "max_depth": 3}
LONG = "x" * 100_000


def space(**kw) -> OperatorSpace:
    return OperatorSpace(**{**ARGS, **kw})


# ----------------------------------------------------------------------------------------------------------
# enumerate(): every argument checked before the walk (time_limit=-1 once walked for 536 s, max_depth=-1
# returned nothing, a string depth gave pybind11's signature dump)
# ----------------------------------------------------------------------------------------------------------

ENUMERATE_ARGS = [
    ({"time_limit": -1}, OptionError, "time_limit must be"),
    ({"time_limit": 0}, OptionError, "or None for no limit"),
    ({"time_limit": math.inf}, OptionError, "or None for no limit"),
    ({"time_limit": math.nan}, OptionError, "time_limit must be"),
    ({"time_limit": "60"}, OptionTypeError, "time_limit must be"),
    ({"max_depth": -1}, OptionError, "max_depth must be in [1, 3], got -1"),
    ({"max_depth": 0}, OptionError, "max_depth must be in [1, 3], got 0"),
    ({"max_depth": 4}, OptionError, "max_depth must be in [1, 3], got 4"),   # beyond the space's own
    ({"max_depth": "5"}, OptionTypeError, "max_depth must be an integer in [1, 3], got '5' (a str)"),
    ({"max_depth": 2.0}, OptionTypeError, "max_depth must be an integer"),
    ({"max_nodes": -1}, OptionError, "max_nodes must be in"),
    ({"max_operators": None}, OptionTypeError, "max_operators must be an integer"),
    ({"start": "root"}, OptionTypeError, "start must be a Node of this space"),
]


@pytest.mark.parametrize("kwargs, error, message", ENUMERATE_ARGS, ids=[repr(a[0]) for a in ENUMERATE_ARGS])
def test_bad_enumerate_arguments_name_the_argument(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        space().enumerate(**kwargs)
    assert message in str(info.value) and "incompatible function arguments" not in str(info.value)


def test_enumerate_takes_none_for_no_time_limit_and_another_spaces_node_is_refused() -> None:
    s = space()
    walked = s.enumerate(2, time_limit=None)
    assert walked.stop_reason == "exhausted" and walked.operator_count == s.enumerate(2).operator_count > 0
    with pytest.raises(OptionTypeError, match="start must be a Node of this space"):
        s.enumerate(start=space().root())


# ----------------------------------------------------------------------------------------------------------
# replay(): keys as a JSON file may hold them
# ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, message", [
    ([1, 2], "step 0 of the replay path: a child key is a string of 16 hex digits, got 1 (a int)"),
    (json.loads('["0123456789abcdef", null]'), "step 1 of the replay path: a child key is a string of 16 hex digits, "
                                                "got None (a NoneType)"),
    ("0123456789abcdef", "a replay path is a list of child keys"),
    (None, "a replay path is a list of child keys"),
    (["\x00" + LONG], "step 0 (key '\\x00xxx"),  # a string key that is no child: echoed capped, NUL escaped
])
def test_replay_with_keys_that_are_not_strings_is_an_operator_format_error(path, message: str) -> None:
    with pytest.raises(OperatorFormatError) as info:
        space().replay(path)
    assert message in str(info.value) and len(str(info.value)) < 300


def test_node_errors_are_syno_errors() -> None:
    root = space().root()
    with pytest.raises(NotAChildError, match="^'nope' is not a child of node") as info:
        root.apply("nope")
    assert isinstance(info.value, KeyError)
    with pytest.raises(NotFinalError) as info:
        root.to_operator()
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------------------------------------
# echoed fields: at most LIMIT characters of the value and its length; a NUL shown escaped, nothing cut
# ----------------------------------------------------------------------------------------------------------

def _message(call) -> str:
    with pytest.raises(SynoError) as info:
        call()
    return str(info.value)


ECHOES = [  # (call, text the message holds)
    (lambda: space(max_depth=LONG), "... (100000 characters) (a str)"),
    (lambda: space(max_flops=LONG), "... (100000 characters)"),
    (lambda: space(**{LONG: 1}), "unknown option 'xxx"),
    (lambda: space(mappings=[{LONG: 0}]), "(100000 characters)"),
    (lambda: space(mappings=[{"N": "\x00" + LONG}]), "got '\\x00xxx"),
    (lambda: space(input_shape="[N, C_in, H, " + LONG + "\x00]"), "\\x00]' (100015 characters): expected ASCII"),
    (lambda: space(max_counts={LONG: 1}), "unknown primitive 'xxx"),
    (lambda: space(seed=[LONG]), "seed must be an integer, got ['xxx"),
    (lambda: space(mappings=[{"N": 10 ** 5000}]), "sizes must be positive integers"),  # no int->str ValueError
]


@pytest.mark.parametrize("call, text", ECHOES, ids=[str(i) for i in range(len(ECHOES))])
def test_python_checks_cap_what_they_echo(call, text: str) -> None:
    message = _message(call)
    assert text in message and "x" * (LIMIT + 1) not in message, message[:500]
    assert "\x00" not in message


NATIVE_ECHOES = [  # the core's own messages, as a direct call (or a space past the Python checks) gets them
    (lambda: _native.parse_shape("[N, " + LONG + "^]"), "...\"xxx", "(100006 characters): expected"),
    (lambda: _native.parse_shape("[N,\x00 " + LONG + "]"), '"[N,\\x00 xxx', "(100006 characters): expected"),
    (lambda: space(fixed=[LONG]), "fixed variable 'xxx", "(100000 characters) is not a variable"),
    (lambda: space(input_shape="[N, C_in, H, W, " + "y" * 200 + "]"), "variable 'yyy", "(200 characters) has no value"),
]


@pytest.mark.parametrize("call, start, end", NATIVE_ECHOES, ids=[str(i) for i in range(len(NATIVE_ECHOES))])
def test_native_messages_cap_what_they_echo(call, start: str, end: str) -> None:
    message = _message(call)
    assert start in message and end in message and "x" * (LIMIT + 1) not in message, message[:500]
    assert "\x00" not in message


def test_a_spec_error_far_into_the_text_shows_the_text_around_it() -> None:
    text = "[N, " + "C*" * 500 + "?]"
    with pytest.raises(SpecError) as info:
        _native.parse_shape(text)
    position = info.value.position
    assert position == text.index("?")
    assert re.search(r'\.\.\."(C\*)+\?\]" \(1006 characters\)', str(info.value)), str(info.value)


@pytest.mark.parametrize("value, expected", [
    ("ab", "'ab'"),
    ("a\x00b", "'a\\x00b'"),
    ("x" * 81, f"'{'x' * 80}'... (81 characters)"),
    (b"\x00" * 100, "(100 bytes)"),
    (list(range(1000)), "[0, 1, 2, 3, 4, 5, 6, 7, ...]"),
])
def test_shown(value, expected: str) -> None:
    assert expected in shown(value)


# ----------------------------------------------------------------------------------------------------------
# export -o into a missing folder (issue 26, item 3): a SynoError naming the folder, not [Errno 2]
# ----------------------------------------------------------------------------------------------------------

def test_an_export_path_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    from syno_automl.export import check_output_path, write_output

    target = tmp_path / "no" / "such" / "op.py"
    with pytest.raises(OutputPathError, match=re.escape(f"the folder '{target.parent}' does not exist")) as info:
        write_output(target, "x = 1\n")
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(OutputPathError, match="it is a folder"):
        check_output_path(tmp_path)
    assert write_output(tmp_path / "op.py", "x = 1\n").read_text() == "x = 1\n"


# ----------------------------------------------------------------------------------------------------------
# budgets: one no operator can meet is refused up front (tests/test_hardening.py's BUDGETS table); one that
# leaves sampling with nothing, unproven, says so instead of returning [] without a word
# ----------------------------------------------------------------------------------------------------------

def test_sampling_that_finds_nothing_says_so() -> None:
    # a cost budget that leaves nothing (above the proven bound, below any operator) is named as the reason
    s = space(max_depth=6, coefficients=["k=3: 2", "s=2: 2"], max_cost=1000)
    with pytest.raises(EmptySpaceError, match=r"no operator found within max_cost=1000 .* in 10 descents"):
        s.sample(2, seed=0, max_attempts=10)
    assert s.last_report.stop_reason == "attempts"
