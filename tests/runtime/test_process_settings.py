"""Process-wide settings belong to the entry points (syno_automl.runtime.process): a library caller who opens a
study and times an operator finds its process as it left it (threads, the garbage collector, the environment),
and configure_process, which the CLI and run_search call, sets what it says. Each check runs in a fresh
interpreter: the settings are per process, and this one's are pytest's."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

LIBRARY_CALLER = textwrap.dedent("""
    import gc, json, os, sys
    import torch
    torch.set_num_threads(2)
    before = {"threads": torch.get_num_threads(), "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
              "environ": dict(os.environ)}

    from syno_automl.config import SearchConfig
    from syno_automl.speed.paired import PairedProtocol
    from syno_automl.speed.probe import SpeedProbe
    from syno_automl.study.context import prepare
    from syno_automl.study.opening import open_study

    config = SearchConfig(tracking_uri=None, storage="sqlite:///" + sys.argv[1], max_depth=6, trials=1)
    context = prepare(config)
    study = open_study(config, context)
    probe = SpeedProbe(context.speed_subject(),
                       protocol=PairedProtocol(warmup=1, min_block_s=0.002, min_pairs=4, max_pairs=4, copies=1))
    estimate = probe.measure(context.space.sample(1, seed=3)[0])
    after = {"threads": torch.get_num_threads(), "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
             "environ": dict(os.environ)}
    print(json.dumps({"before": before, "after": after, "measured": estimate is not None,
                      "trials": len(study.trials)}))
""")

ENTRY_POINT = textwrap.dedent("""
    import gc, json
    import torch
    torch.set_num_threads(2)
    from syno_automl.runtime.process import configure_process
    settings = configure_process(threads=1, freeze_heap=True)
    print(json.dumps({"threads": torch.get_num_threads(), "frozen": gc.get_freeze_count() > 0,
                      "reported": [settings.threads, settings.heap_frozen]}))
""")


# set by the libraries themselves, not by this package: scikit-learn at import (KMP_*), Lightning at import
# (PYTORCH_NVML_BASED_CUDA_CHECK), Inductor on its first use (its cache folder)
THIRD_PARTY = {"KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "PYTORCH_NVML_BASED_CUDA_CHECK", "TORCHINDUCTOR_CACHE_DIR"}


def _run(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_library_caller_finds_its_process_as_it_left_it(tmp_path: Path):
    found = _run(LIBRARY_CALLER, str(tmp_path / "syno.db"))
    assert found["measured"] and found["trials"] >= 1   # the study opened and the operator was timed
    before, after = found["before"], found["after"]
    assert after["threads"] == before["threads"] == 2
    assert after["gc_enabled"] and after["frozen"] == before["frozen"] == 0
    changed = {k for k in set(before["environ"]) | set(after["environ"])
               if before["environ"].get(k) != after["environ"].get(k)} - THIRD_PARTY
    assert not changed, f"the library changed the environment: {sorted(changed)}"


def test_an_entry_point_sets_the_process_up():
    found = _run(ENTRY_POINT)
    assert found["threads"] == 1 and found["frozen"] and found["reported"] == [1, True]
