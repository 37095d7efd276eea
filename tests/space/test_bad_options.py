"""Bad space options: each is a clear OptionError (or OptionTypeError) naming the option, both at the Python face
and in the core's own checks (for callers that skip the Python face); a valid space keeps its config.

One row per example of a bad option (and its neighbours).
"""
from __future__ import annotations

import math

import pytest
from _syno_helpers import CONV_ARGS, CONV_MAPPING, CONV_PRIMARY, conv_space

from syno_automl import OperatorSpace, SynoError, _native
from syno_automl.errors import OptionError, OptionTypeError

OPTIONS = [
    # kwargs, exception type, text the message must hold
    ({"max_depth": None}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": "8"}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": 8.5}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": 2**40}, OptionError, "max_depth must be in [1, 30], got 1099511627776"),
    ({"max_depth": True}, OptionTypeError, "max_depth must be an integer"),
    ({"max_counts": {"SPLIT": "x"}}, OptionTypeError, "max_counts['SPLIT'] must be an integer"),
    ({"max_counts": {"SPLIT": -3}}, OptionError, "max_counts['SPLIT'] must be in [0, 64]"),
    ({"max_counts": {"SPLAT": 1}}, OptionError, "max_counts: unknown primitive 'SPLAT'"),
    ({"max_counts": [("SPLIT", 1)]}, OptionTypeError, "max_counts must be a dict"),
    ({"max_weights": -1}, OptionError, "max_weights must be in [0, 64], got -1"),
    ({"max_reductions": -1}, OptionError, "max_reductions must be in [0, 64], got -1"),
    ({"max_shares": -1}, OptionError, "max_shares must be in [0, 64], got -1"),
    ({"min_weights": 3, "max_weights": 2}, OptionError, "min_weights=3 is above max_weights=2"),
    ({"max_primary_degree": 100}, OptionError, "max_primary_degree must be in [0, 8]"),
    ({"min_unfold_ratio": math.nan}, OptionError, "min_unfold_ratio must be a finite non-negative number"),
    ({"min_unfold_ratio": math.inf}, OptionError, "min_unfold_ratio must be a finite non-negative number"),
    ({"min_weight_params": -2.0}, OptionError, "min_weight_params must be a finite non-negative number"),
    ({"max_flops": "10"}, OptionTypeError, "max_flops must be a non-negative number"),
    ({"max_flops": -1.0}, OptionError, "max_flops must be a non-negative number"),
    ({"min_params": math.nan}, OptionError, "min_params must be a non-negative number"),
    ({"distance_pruning": 1}, OptionTypeError, "distance_pruning must be True or False"),
    ({"bogus": 1}, OptionError, "unknown option 'bogus'"),
    ({"mappings": CONV_MAPPING}, OptionTypeError, "mappings must be a list of dicts (one per placeholder), got a dict"),
    ({"mappings": [{**CONV_MAPPING, "N": 2.5}]}, OptionTypeError, "mappings[0]['N'] must be an integer size, got 2.5"),
    ({"mappings": [{**CONV_MAPPING, "H": 2**70}]}, OptionError, "sizes must be positive integers below 2**63"),
    ({"mappings": [CONV_MAPPING, "H=8"]}, OptionTypeError, "mappings[1] must be a dict"),
    ({"primary": "N: 0"}, OptionTypeError, "primary must be a list of spec strings"),
    ({"coefficients": [3]}, OptionTypeError, "coefficients[0] must be a string"),
    ({"seed": "0"}, OptionTypeError, "seed must be an integer"),
    ({"threads": 100000}, OptionError, "threads must be in [1, 1024], got 100000"),
    ({"threads": 0}, OptionError, "threads must be in [1, 1024], got 0"),
]


@pytest.mark.parametrize("kwargs, error, message", OPTIONS, ids=[repr(o[0])[:60] for o in OPTIONS])
def test_bad_options_name_the_option(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        conv_space(**kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, SynoError) and isinstance(info.value, ValueError)


NATIVE_OPTIONS = [  # the core's own checks, for callers that skip the Python face
    ({"max_depth": None}, "max_depth must be an integer, got a NoneType"),
    ({"max_depth": 2**40}, "max_depth must be in [1, 30], got 1099511627776"),
    ({"max_counts": {"SPLIT": "x"}}, "max_counts['SPLIT'] must be an integer"),
    ({"max_weights": -1}, "max_weights must be in [0, 64]"),
    ({"min_unfold_ratio": math.nan}, "min_unfold_ratio must be a finite non-negative number"),
    ({"flops_pruning": "yes"}, "flops_pruning must be True or False"),
    ({"max_flops": 10**400}, None),  # an int beyond a double is as good as infinity: accepted
]


@pytest.mark.parametrize("options, message", NATIVE_OPTIONS, ids=[repr(o[0])[:50] for o in NATIVE_OPTIONS])
def test_native_layer_checks_its_own_invariants(options: dict, message: str | None) -> None:
    def build():
        return _native.Space(CONV_ARGS["input_shape"], CONV_ARGS["output_shape"], CONV_PRIMARY, ["k=3: 2"],
                             [CONV_MAPPING], [], options)
    if message is None:
        build()
        return
    with pytest.raises(OptionError, match=None) as info:
        build()
    assert message in str(info.value)


def test_a_valid_space_keeps_its_config() -> None:
    s = conv_space(max_counts={"EXPAND": 1, "SPLIT": None}, min_unfold_ratio=1.5, max_flops=1e9)
    assert OperatorSpace(**s.config()).config() == s.config()
    assert s.budgets == {"max_flops": 1e9}
