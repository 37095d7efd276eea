"""Bad shape specs: a SpecError that says what is wrong and where (the position kept, past a NUL too), and
exponents that never wrap."""
from __future__ import annotations

import pytest
from _syno_helpers import conv_space

from syno_automl import SpecError, SynoError, _native

H257 = "*".join(["H^8"] * 32) + "*H"      # H^257: was accepted as H
H128 = "*".join(["H^8"] * 16)             # H^128: was reported as H^-128
SPECS = [
    # input shape, text the message must hold, position
    ("[N, \udc80]", "expected ASCII", 4),          # a lone surrogate
    ("[N, C_in, é, W]", "expected ASCII", 10),
    ("[N,\x00 C_in, H, W]", "expected ASCII without control characters (got '\\x00')", 3),
    (f"[N, C_in, {H257}, W]", "within [-127, 127] (this dimension multiplies to H^257)", 10),
    (f"[N, C_in, {H128}, W]", "multiplies to H^128", 10),
    (f"[N, C_in, {'*'.join(['H^-8'] * 16)}, W]", "multiplies to H^-128", 10),
]


@pytest.mark.parametrize("shape, message, position", SPECS, ids=[ascii(s[0])[:30] for s in SPECS])
def test_bad_specs_say_what_and_where(shape: str, message: str, position: int) -> None:
    with pytest.raises(SpecError) as info:
        conv_space(input_shape=shape)
    assert message in str(info.value) and f"at position {position}" in str(info.value)
    assert info.value.position == position


def test_native_spec_errors_keep_the_text_after_a_nul() -> None:
    with pytest.raises(SpecError) as info:
        _native.parse_shape("[N,\x00 C]")
    assert str(info.value) == '"[N,\\x00 C]": expected a dimension (a variable name) at position 3'
    assert info.value.position == 3 and isinstance(info.value, SynoError)


def test_exponents_that_cancel_are_fine_and_large_ones_are_errors() -> None:
    dims = _native.parse_shape("[" + "*".join(["H^8"] * 15) + "*H^-8]")   # H^112: in range
    assert sum(e for _, e in dims[0]["factors"]) == 112
    with pytest.raises(SpecError, match="H\\^257"):
        _native.parse_shape(f"[{H257}]")
