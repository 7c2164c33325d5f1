"""Parity report: every field per layer against its tolerance, the worst cell located."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.parity_report import (FLOAT, difference_array, difference_map, field_names, first_routing_difference,
                                parity_report, tolerance)
from core.runners import NumpyRunner, OnnxRunner
from core.trace import LAYER_FIELDS


def with_layer_field(trace, layer: int, name: str, change):  # a copy of trace with one field changed by change(a)
    a = np.array(getattr(trace.layers[layer], name))
    change(a)
    layers = list(trace.layers)
    layers[layer] = replace(layers[layer], **{name: a})
    return replace(trace, layers=tuple(layers))


@pytest.fixture(scope="module")
def pair(make_bundle):
    bundle = make_bundle(seed=6, num_attention_heads=4, num_key_value_heads=2)
    ids = np.arange(20) * 5 % bundle.config.vocab_size
    return NumpyRunner(bundle).run(ids), OnnxRunner(bundle).run(ids)


def test_every_field_of_every_layer_has_a_row_and_the_backends_agree(pair):
    a, b = pair
    rows = parity_report(a, b)
    assert [r.field for r in rows] == field_names(a.num_layers)
    assert len(rows) == 1 + a.num_layers * len(LAYER_FIELDS) + 2
    assert [r.layer for r in rows if r.field.startswith("layers.1.")] == [1] * len(LAYER_FIELDS)
    assert first_routing_difference(a, b) is None
    for r in rows:
        assert r.ok, (r.field, r.max_abs, r.worst_tolerance)


def test_tolerance_grows_with_the_fields_largest_value_and_integers_are_exact():
    assert tolerance("layers.0.attn") == FLOAT == tolerance("logits") == tolerance("layers.1.moe_out")
    small, large = FLOAT.at(np.array([0.0, 1.0])), FLOAT.at(np.array([0.0, 1.0, 1000.0, -np.inf]))
    assert small[0] == small[1] == FLOAT.atol + FLOAT.rtol
    assert large[0] == large[1] == FLOAT.atol + 1000 * FLOAT.rtol  # the field's scale, not the cell's
    assert tolerance("expert_ids").at(np.array([3.0]))[0] == 0.0


def test_the_worst_cell_is_located_by_head_query_and_key(pair):
    a, b = pair
    moved = with_layer_field(b, 1, "attn", lambda x: x.__setitem__((2, 5, 3), x[2, 5, 3] + 1e-3))
    row = next(r for r in parity_report(a, moved) if r.field == "layers.1.attn")
    allowed = FLOAT.at(a.layers[1].attn, blocks=2)[0, 0, 0]   # layer 1: the second block passed
    assert not row.ok and row.ratio == pytest.approx(1e-3 / allowed, rel=0.05) and row.worst_tolerance == pytest.approx(allowed)
    assert row.worst == {"head": 2, "query": 5, "key": 3}
    assert row.location() == "head 2, query 5, key 3"
    assert row.onnx_value - row.numpy_value == pytest.approx(1e-3, rel=0.05)
    diff = difference_array(a, moved, "layers.1.attn")
    assert diff.shape == a.layers[1].attn.shape and np.unravel_index(diff.argmax(), diff.shape) == (2, 5, 3)


def test_a_large_value_may_differ_more_than_a_small_one(pair):
    a, b = pair
    big = with_layer_field(a, 0, "resid_post", lambda x: x.__setitem__((4, 9), 1000.0))
    near = with_layer_field(big, 0, "resid_post", lambda x: x.__setitem__((4, 9), 1000.005))
    assert next(r for r in parity_report(big, near) if r.field == "layers.0.resid_post").ok
    off = with_layer_field(a, 0, "resid_post", lambda x: x.__setitem__((4, 9), x[4, 9] + 0.005))
    row = next(r for r in parity_report(a, off) if r.field == "layers.0.resid_post")
    assert not row.ok and row.worst == {"token": 4, "index": 9}


def test_masked_cells_agree_and_an_unmasked_one_is_infinitely_wrong(pair):
    a, b = pair
    assert difference_array(a, b, "layers.0.scores")[0, 0, 1] == 0.0   # -inf in both: above the diagonal
    leak = with_layer_field(b, 0, "scores", lambda x: x.__setitem__((1, 2, 7), 0.5))
    row = next(r for r in parity_report(a, leak) if r.field == "layers.0.scores")
    assert row.ratio == np.inf and row.worst == {"head": 1, "query": 2, "key": 7}


def test_a_different_expert_choice_is_reported_exactly(pair):
    a, b = pair
    swapped = with_layer_field(b, 1, "expert_ids", lambda x: x.__setitem__((6, 0), (x[6, 0] + 1) % 4))
    row = next(r for r in parity_report(a, swapped) if r.field == "layers.1.expert_ids")
    assert not row.ok and row.worst == {"token": 6, "slot": 0}
    assert first_routing_difference(a, swapped) == (1, 6)


def test_traces_of_different_ids_are_refused(bundle):
    runner = NumpyRunner(bundle)
    with pytest.raises(ValueError, match="different token ids"):
        parity_report(runner.run([1, 2]), runner.run([1, 3]))


def test_a_difference_map_is_one_heads_slice_in_log10_with_its_worst_cell(pair):
    a, b = pair
    moved = with_layer_field(b, 1, "attn", lambda x: x.__setitem__((2, 5, 3), x[2, 5, 3] + 1e-3))
    picture = difference_map(a, moved, "layers.1.attn", 2, floor=1e-12)
    diff = difference_array(a, moved, "layers.1.attn")[2]
    assert np.array_equal(picture.matrix, diff) and picture.worst == (5, 3)
    assert picture.worst_diff == pytest.approx(1e-3, rel=0.05)
    assert np.array_equal(picture.logs, np.log10(np.maximum(diff, 1e-12)))
    assert picture.levels[0] <= picture.logs.min() and picture.levels[1] >= picture.logs.max()
    logits = difference_map(a, b, "logits", None)
    assert logits.matrix.shape == a.logits.shape and logits.head is None
