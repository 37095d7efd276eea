"""bench/replaced_share.py's two calls on the default search's context: the original model, and its replaced
layers alone, each on the input it meets in the model (no timing asserted)."""
from __future__ import annotations

import replaced_share  # bench/replaced_share.py (bench/ is on pytest's pythonpath)
import torch

from syno_automl.config import SearchConfig
from syno_automl.study import prepare


def test_the_replaced_layers_run_alone_on_the_inputs_they_meet_in_the_model() -> None:
    context = prepare(SearchConfig(tracking_uri=None))
    whole, replaced, shapes = replaced_share.replaced_layers_call(context)
    batch = context.timing_example
    logits = whole()
    assert logits.shape == (batch.shape[0], 10) and torch.isfinite(logits).all()
    # one input per replaced layer, at the sizes the space maps for it (the second conv sees the pooled map)
    mappings = context.space.mappings
    assert shapes == [(m["N"], m["C_in"], m["H"], m["W"]) for m in mappings] and len(shapes) == 2
    assert shapes[0][2] == batch.shape[2] and shapes[1][2] < shapes[0][2]
    replaced()
