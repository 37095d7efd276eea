"""Bad arguments to the walks (sample(), enumerate()): each is a clear error naming the argument, checked before the
walk; absurd thread counts are errors, and a thread that cannot start is a ResourceError, never SIGABRT."""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap

import pytest
from _syno_helpers import conv_space

from syno_automl.errors import OptionError, OptionTypeError

# ----------------------------------------------------------------------------------------------------------
# sample(): threads (absurd counts are errors, a thread that cannot start is an exception) and its arguments
# ----------------------------------------------------------------------------------------------------------


def test_absurd_thread_counts_are_clear_errors() -> None:
    s = conv_space()
    with pytest.raises(OptionError, match="threads must be in \\[1, 1024\\], got 100000"):
        s.sample(3, threads=100000)
    with pytest.raises(OptionError, match="threads=100000 is more than 1024"):  # the core's own check
        s._native.sample(3, 0, 100000, 1000, 10.0, 64, None)
    assert len(s.sample(3, threads=1024)) == 3  # the most allowed: more threads than work just idle


SAMPLE_ARGS = [
    ({"count": -1}, OptionError, "count must be in"),
    ({"count": 2**40}, OptionError, "count must be in"),
    ({"count": 1.5}, OptionTypeError, "count must be an integer"),
    ({"count": 1, "time_limit": math.nan}, OptionError, "time_limit"),
    ({"count": 1, "budget": 0}, OptionError, "budget must be in"),
    ({"count": 1, "max_attempts": -5}, OptionError, "max_attempts must be in"),
]


@pytest.mark.parametrize("kwargs, error, message", SAMPLE_ARGS, ids=[repr(a[0]) for a in SAMPLE_ARGS])
def test_bad_sample_arguments_name_the_argument(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        conv_space().sample(**kwargs)


def test_a_thread_that_cannot_start_is_a_resource_error() -> None:
    # Thread stacks of 1 GiB under a 1.5 GiB address-space allowance: the second sampling thread cannot start.
    code = textwrap.dedent("""
        import resource, sys
        from syno_automl import OperatorSpace
        from syno_automl.errors import ResourceError
        s = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2"], [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=6)
        used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (1536 << 20), resource.RLIM_INFINITY))
        try:
            s.sample(3, seed=0, threads=8)
        except ResourceError as e:
            print("ResourceError:", e)
            sys.exit(0)
        print("no error")
    """)

    def big_stacks() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_STACK, (1 << 30, resource.RLIM_INFINITY))

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=big_stacks,
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-2000:])  # -6 would be SIGABRT
    assert re.search(r"ResourceError: could not start sampling thread \d of 8 \(lower `threads`\): ", run.stdout)


# ----------------------------------------------------------------------------------------------------------
# enumerate(): every argument checked before the walk (time_limit=-1 once walked for 536 s, max_depth=-1
# returned nothing, a string depth gave pybind11's signature dump); its depth range is the space's own, [1, 3]
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
        conv_space(max_depth=3).enumerate(**kwargs)
    assert message in str(info.value) and "incompatible function arguments" not in str(info.value)


def test_enumerate_takes_none_for_no_time_limit_and_another_spaces_node_is_refused() -> None:
    s = conv_space(max_depth=3)
    walked = s.enumerate(2, time_limit=None)
    assert walked.stop_reason == "exhausted" and walked.operator_count == s.enumerate(2).operator_count > 0
    with pytest.raises(OptionTypeError, match="start must be a Node of this space"):
        s.enumerate(start=conv_space(max_depth=3).root())
