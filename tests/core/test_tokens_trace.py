"""The tokens-only trace a run shows while the model runs (core.session.tokens_trace): the same tokens, labels,
text and interventions as the run's own trace, and no field; None where the run itself fails."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from core.interventions import Interventions
from core.runners import NumpyRunner
from core.session import prepare_text, run_prepared, tokens_trace
from core.trace_fields import trace_holds

TEXTS = st.text(alphabet=st.sampled_from(list("ab cé。订单成交 \n") + ["🙂"]), min_size=1, max_size=40)


@example(text="🙂", context=2)   # four byte tokens: nothing fits
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS, context=st.integers(2, 24))
def test_it_holds_what_the_run_labels_its_trace_with(bundle, text, context):
    prepared = prepare_text(bundle.tokenizer, text, context)
    early = tokens_trace(bundle, "numpy", prepared)
    if not prepared.tokenization.tokens:   # a first character of more byte tokens than the context: no run either
        assert early is None
        with pytest.raises(ValueError, match="fits in the model's context"):
            run_prepared(NumpyRunner(bundle), prepared)
        return
    run = run_prepared(NumpyRunner(bundle), prepared)
    assert early is not None and early.fields == frozenset()
    assert np.array_equal(early.input_ids, run.input_ids)
    assert (early.tokens, early.text, early.truncated_chars) == (run.tokens, run.text, run.truncated_chars)
    assert early.tokenization is run.tokenization and early.vocab_labels == run.vocab_labels
    assert np.array_equal(early.head_mask, run.head_mask) and np.array_equal(early.expert_override,
                                                                             run.expert_override)
    assert trace_holds(early, ()) and not trace_holds(early, ("attn",))   # it holds no array of the model
    assert early.logits is None and all(layer.attn is None for layer in early.layers)


def test_it_carries_the_interventions_of_the_run(bundle):
    cfg = bundle.config
    mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    mask[0, 1] = 0.0
    prepared = prepare_text(bundle.tokenizer, "The cat sat.", bundle.context)
    early = tokens_trace(bundle, "onnx", prepared, Interventions(head_mask=mask))
    assert early.backend == "onnx" and np.array_equal(early.head_mask, mask)
    assert np.array_equal(early.interventions.head_mask, mask)


def test_none_where_the_run_itself_fails(bundle):
    assert tokens_trace(bundle, "numpy", prepare_text(bundle.tokenizer, "", bundle.context)) is None
    wrong = Interventions(head_mask=np.ones((1, 1), np.float32))   # not this model's [L, H]
    assert tokens_trace(bundle, "numpy", prepare_text(bundle.tokenizer, "The cat sat.", bundle.context), wrong) is None
