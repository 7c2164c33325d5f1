"""Sentence role badges on a big model's partial trace: from every layer's thumbnail while it is the attention
itself (up to THUMB_CELLS tokens), from the selected layer's attention past that, NaN for a layer it lacks."""
from __future__ import annotations

import numpy as np
import pytest

from core.attention_summary import THUMB_CELLS
from core.attention_view import attention_fields
from core.head_roles import sentence_roles
from core.role_badges import sentence_roles_held
from core.runners import NumpyRunner, OnnxRunner


def _ids(bundle, n: int) -> np.ndarray:   # a repeated half, so the duplicate and induction roles are defined
    half = (np.arange(n // 2) * 7 + 3) % bundle.config.vocab_size
    return np.concatenate([half, half])


@pytest.mark.parametrize("runner_class", [NumpyRunner, OnnxRunner])
def test_a_short_partial_trace_scores_every_head_as_the_full_trace_does(bundle, runner_class):
    runner, ids = runner_class(bundle), _ids(bundle, 24)
    partial = runner.run(ids, fields=attention_fields(1))   # layer 0's attention is not kept
    assert partial.layers[0].attn is None
    expected = sentence_roles(runner.run(ids)).scores
    assert not np.isnan(expected).any()
    np.testing.assert_allclose(sentence_roles_held(partial).scores, expected, rtol=0, atol=1e-6)


def test_past_the_thumbnails_cell_count_only_the_layers_with_attention_are_scored(bundle):
    runner, ids = NumpyRunner(bundle), _ids(bundle, THUMB_CELLS + 36)
    scores = sentence_roles_held(runner.run(ids, fields=attention_fields(1))).scores
    assert np.isnan(scores[0]).all() and not np.isnan(scores[1]).any()
    np.testing.assert_allclose(scores[1], sentence_roles(runner.run(ids)).scores[1], rtol=0, atol=1e-12)
