"""The attention grid's summaries (core.attention_summary) and per-layer requests: what a big model's
Attention panel asks a run for instead of every layer's [H, T, T]."""
from __future__ import annotations

import numpy as np
import pytest

from core import attention_view as av
from core.attention_summary import THUMB_CELLS, attention_thumbnail, attention_top, summaries, thumb_size
from core.parity import field_difference, field_tolerance
from core.runners import NumpyRunner, OnnxRunner

LENGTHS = [1, 11, THUMB_CELLS, THUMB_CELLS + 1, 128]   # 128: the test bundle's whole context
REQUEST = av.attention_fields(1) + ("logits.last",)


@pytest.fixture(scope="module")
def runners(bundle):
    return {"numpy": NumpyRunner(bundle), "onnx": OnnxRunner(bundle)}


def _ids(n: int, vocab: int) -> np.ndarray:
    return (np.arange(n) * 37 + 5) % vocab


def test_a_thumbnail_is_the_attention_itself_up_to_thumb_cells_tokens_and_its_block_maxima_past_it():
    rng = np.random.default_rng(0)
    short = rng.random((3, THUMB_CELLS, THUMB_CELLS)).astype(np.float32)
    assert np.array_equal(attention_thumbnail(short), short)
    long = rng.random((3, 130, 130)).astype(np.float32)   # stride 3: 44 blocks, the last one of a single row
    thumb = attention_thumbnail(long)
    assert thumb.shape == (3, 44, 44) == (3, thumb_size(130), thumb_size(130))
    assert thumb[1, 2, 5] == long[1, 6:9, 15:18].max()
    assert thumb[2, 43, 43] == long[2, 129, 129]


def test_a_heads_top_leaves_out_the_first_query():
    attn = np.zeros((2, 3, 3), np.float32)
    attn[:, 0, 0] = 1.0
    attn[0, 2, 1], attn[1, 1, 0] = 0.7, 0.4
    assert attention_top(attn).tolist() == pytest.approx([0.7, 0.4])


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("runner_name", ["numpy", "onnx"])
def test_a_partial_runs_summaries_are_those_of_the_full_runs_attention(runners, bundle, runner_name, n):
    runner = runners[runner_name]
    ids = _ids(n, bundle.config.vocab_size)
    full, part = runner.run(ids), runner.run(ids, fields=REQUEST)
    for layer, full_layer in zip(part.layers, full.layers):
        expected = summaries(full_layer.attn)
        assert layer.attn_thumb.shape == (bundle.config.num_attention_heads, thumb_size(n), thumb_size(n))
        for name, value in expected.items():
            assert field_difference(getattr(layer, name), value) <= field_tolerance(value), name
            if runner_name == "numpy":   # the same operations on the same numbers
                assert np.array_equal(getattr(layer, name), value), name
    thumbs = av.thumbnails(full)   # what the grid draws: the same from either trace
    assert field_difference(av.thumbnails(part), thumbs) <= field_tolerance(thumbs)
    assert field_difference(av.head_maxima(part), av.head_maxima(full)) <= 1e-6


@pytest.mark.parametrize("runner_name", ["numpy", "onnx"])
def test_a_request_for_one_layer_keeps_that_layer_and_computes_no_other(runners, bundle, runner_name):
    runner = runners[runner_name]
    ids = _ids(20, bundle.config.vocab_size)
    full = runner.run(ids)
    for layer in range(bundle.config.num_hidden_layers):   # selecting another layer: a new request
        part = runner.run(ids, fields=av.attention_fields(layer))
        for l, held in enumerate(part.layers):
            if l == layer:
                for name in ("attn", "scores"):
                    want = getattr(full.layers[l], name)
                    assert field_difference(getattr(held, name), want) <= field_tolerance(want), name
            else:
                assert held.attn is None and held.scores is None
            assert held.q is None and held.resid_post is None
        assert part.logits is None and part.fields == frozenset(
            [f"layers.{layer}.attn", f"layers.{layer}.scores",
             *(f"layers.{l}.{s}" for l in range(bundle.config.num_hidden_layers) for s in ("attn_thumb", "attn_top"))])


def test_one_onnx_session_serves_every_request(bundle):
    runner = OnnxRunner(bundle)
    ids = _ids(9, bundle.config.vocab_size)
    session = runner._session
    for fields in (None, av.attention_fields(0), av.attention_fields(1), ["logits.last"], ["resid_post"]):
        runner.run(ids, fields=fields)
    runner.run_logits(ids)
    assert runner._session is session   # another layer is another feed of the gates, not another graph


def test_the_full_trace_holds_no_summaries_and_exports_as_before(runners, bundle):
    trace = runners["onnx"].run(_ids(9, bundle.config.vocab_size))
    assert all(layer.attn_thumb is None and layer.attn_top is None for layer in trace.layers)
    assert not any(name.endswith(("attn_thumb", "attn_top")) for name in trace.to_arrays())
