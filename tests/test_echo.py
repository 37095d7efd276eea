"""What error messages echo of the input (syno_automl.echo): at most LIMIT characters of a value and its length,
a NUL shown escaped, nothing cut; in the Python checks and in the native core's messages alike."""
from __future__ import annotations

import re

import pytest
from _syno_helpers import conv_space

from syno_automl import SpecError, SynoError, _native
from syno_automl.echo import LIMIT, shown

LONG = "x" * 100_000


def _message(call) -> str:
    with pytest.raises(SynoError) as info:
        call()
    return str(info.value)


ECHOES = [  # (call, text the message holds)
    (lambda: conv_space(max_depth=LONG), "... (100000 characters) (a str)"),
    (lambda: conv_space(max_flops=LONG), "... (100000 characters)"),
    (lambda: conv_space(**{LONG: 1}), "unknown option 'xxx"),
    (lambda: conv_space(mappings=[{LONG: 0}]), "(100000 characters)"),
    (lambda: conv_space(mappings=[{"N": "\x00" + LONG}]), "got '\\x00xxx"),
    (lambda: conv_space(input_shape="[N, C_in, H, " + LONG + "\x00]"), "\\x00]' (100015 characters): expected ASCII"),
    (lambda: conv_space(max_counts={LONG: 1}), "unknown primitive 'xxx"),
    (lambda: conv_space(seed=[LONG]), "seed must be an integer, got ['xxx"),
    (lambda: conv_space(mappings=[{"N": 10 ** 5000}]), "sizes must be positive integers"),  # no int->str ValueError
]


@pytest.mark.parametrize("call, text", ECHOES, ids=[str(i) for i in range(len(ECHOES))])
def test_python_checks_cap_what_they_echo(call, text: str) -> None:
    message = _message(call)
    assert text in message and "x" * (LIMIT + 1) not in message, message[:500]
    assert "\x00" not in message


NATIVE_ECHOES = [  # the core's own messages, as a direct call (or a space past the Python checks) gets them
    (lambda: _native.parse_shape("[N, " + LONG + "^]"), "...\"xxx", "(100006 characters): expected"),
    (lambda: _native.parse_shape("[N,\x00 " + LONG + "]"), '"[N,\\x00 xxx', "(100006 characters): expected"),
    (lambda: conv_space(fixed=[LONG]), "fixed variable 'xxx", "(100000 characters) is not a variable"),
    (lambda: conv_space(input_shape="[N, C_in, H, W, " + "y" * 200 + "]"), "variable 'yyy",
     "(200 characters) has no value"),
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
