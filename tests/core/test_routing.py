"""core.routing: reading a layer's routing, and forced routing that changes exactly what it should."""
from __future__ import annotations

import numpy as np
import pytest

from core import routing
from core.runners import NumpyRunner
from core.session import analyse

SENTENCES = ["The cat sat on the mat and looked at the door.", "我想查询一下我的订单状态。"]


@pytest.fixture(scope="module", params=SENTENCES, ids=["english", "chinese"])
def trace(request, bundle):
    return analyse(NumpyRunner(bundle), request.param)


def test_chosen_mask_and_weight_matrix_follow_expert_ids():
    ids = np.array([[2, 0], [1, 3]])
    weights = np.array([[0.7, 0.3], [0.6, 0.4]], np.float32)
    mask = routing.chosen_mask(ids, 4)
    assert mask.tolist() == [[True, False, True, False], [False, True, False, True]]
    matrix = routing.weight_matrix(ids, weights, 4)
    np.testing.assert_allclose(matrix, [[0.3, 0, 0.7, 0], [0, 0.6, 0, 0.4]], rtol=1e-6)


def test_weight_matrix_adds_an_expert_forced_into_two_slots():
    matrix = routing.weight_matrix(np.array([[3, 3]]), np.array([[0.5, 0.5]]), 4)
    np.testing.assert_allclose(matrix, [[0, 0, 0, 1.0]])


def test_mistral_order_gives_the_same_weights_as_hugging_face(trace):
    for layer in trace.layers:
        ids, weights = routing.topk_softmax_weights(layer.router_logits, layer.expert_ids.shape[1])
        np.testing.assert_array_equal(ids, layer.expert_ids)
        np.testing.assert_allclose(weights, layer.expert_weights, atol=1e-6)


def test_load_shares_sum_to_one_and_count_every_slot(trace):
    for layer in trace.layers:
        load = routing.expert_load(layer.expert_ids, layer.router_probs)
        assert load.counts.sum() == layer.expert_ids.size
        assert load.share.sum() == pytest.approx(1.0)
        assert load.mean_prob.sum() == pytest.approx(1.0, abs=1e-5)
        for e in range(len(load.counts)):
            assert load.counts[e] == np.count_nonzero(layer.expert_ids == e)


def test_tokens_per_expert_lists_every_routed_token_once_with_its_weight(trace):
    layer = trace.layers[0]
    routed = routing.tokens_per_expert(layer.expert_ids, layer.expert_weights, layer.router_probs.shape[1])
    seen = sorted((r.position, r.slot) for tokens in routed for r in tokens)
    assert seen == sorted((t, s) for t in range(trace.n_tokens) for s in range(layer.expert_ids.shape[1]))
    for expert, tokens in enumerate(routed):
        for r in tokens:
            assert layer.expert_ids[r.position, r.slot] == expert
            assert r.weight == pytest.approx(float(layer.expert_weights[r.position, r.slot]))
        assert [r.weight for r in tokens] == sorted((r.weight for r in tokens), reverse=True)


def test_forced_row_replaces_the_first_choice_and_keeps_the_others():
    logits = np.array([0.1, 2.0, 1.0, 0.5])       # router order: 1, 2, 3, 0
    assert routing.forced_row(logits, 2, 0).tolist() == [0, 2]
    assert routing.forced_row(logits, 3, 0).tolist() == [0, 2, 3]
    assert routing.forced_row(logits, 2, 2).tolist() == [2, 1]   # already chosen: same set, moved first
    assert routing.forced_row(logits, 2, 0, only_this_expert=True).tolist() == [0, 0]
    assert routing.forced_row(logits, 1, 3).tolist() == [3]


def test_force_expert_touches_only_the_layer_and_token_asked_for(trace):
    layer, position = trace.num_layers - 1, trace.n_tokens // 2
    override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                    layer, position, 0)
    assert override.shape == trace.expert_override.shape
    changed = np.argwhere(override != trace.expert_override)
    assert {(int(l), int(t)) for l, t, _ in changed} == {(layer, position)}
    assert override[layer, position, 0] == 0
    assert np.all(override[layer, position] >= 0)
    assert trace.expert_override.min() == -1  # the trace's own array is untouched


def test_force_expert_keeps_an_existing_override(trace):
    first = routing.force_expert(trace.expert_override, trace.layers[0].router_logits[0], 0, 0, 1)
    both = routing.force_expert(first, trace.layers[1].router_logits[1], 1, 1, 2)
    np.testing.assert_array_equal(both[0, 0], first[0, 0])
    assert both[1, 1, 0] == 2


def test_force_expert_rejects_what_is_not_there(trace):
    row = trace.layers[0].router_logits[0]
    with pytest.raises(ValueError):
        routing.force_expert(trace.expert_override, row, trace.num_layers, 0, 0)
    with pytest.raises(ValueError):
        routing.force_expert(trace.expert_override, row, 0, trace.n_tokens, 0)
    with pytest.raises(ValueError):
        routing.force_expert(trace.expert_override, row, 0, 0, row.shape[0])


@pytest.mark.parametrize("only_this_expert", [False, True])
def test_forced_run_changes_only_the_forced_token_and_what_comes_after(bundle, trace, only_this_expert):
    layer, position = 0, trace.n_tokens // 2
    before_ids = trace.layers[layer].expert_ids[position]
    expert = next(e for e in range(trace.config.num_local_experts) if e not in before_ids)
    override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                    layer, position, expert, only_this_expert)
    after = NumpyRunner(bundle).run(trace.input_ids, expert_override=override)
    assert expert in after.layers[layer].expert_ids[position]
    for l in range(trace.num_layers):
        # earlier tokens cannot see a later token: their routing is the same in every layer
        np.testing.assert_array_equal(after.layers[l].expert_ids[:position], trace.layers[l].expert_ids[:position])
        np.testing.assert_array_equal(after.layers[l].router_logits[:position], trace.layers[l].router_logits[:position])
    # the forced layer's router reads nothing the override changed
    np.testing.assert_array_equal(after.layers[layer].router_logits, trace.layers[layer].router_logits)
    changed = routing.rerouted_positions([lt.expert_ids for lt in trace.layers], [lt.expert_ids for lt in after.layers])
    assert (layer, position) in changed
    assert all(t >= position and (l > layer or (l, t) == (layer, position)) for l, t in changed)
    assert not np.allclose(after.logits[position], trace.logits[position])


def test_changes_routing_compares_sets_not_slots():
    assert not routing.changes_routing(np.array([1, 2]), np.array([2, 1]))
    assert routing.changes_routing(np.array([1, 2]), np.array([3, 1]))
    assert routing.changes_routing(np.array([1, 2]), np.array([1, 1]))


def test_candidate_changes_cover_top_before_then_new_top_after():
    before = np.array([0.5, 0.3, 0.1, 0.05, 0.05])
    after = np.array([0.1, 0.3, 0.1, 0.45, 0.05])
    changes = routing.candidate_changes(before, after, n=2)
    assert [c.token_id for c in changes] == [0, 1, 3]
    assert changes[0].delta == pytest.approx(-0.4)
    assert changes[2].before == pytest.approx(0.05) and changes[2].after == pytest.approx(0.45)


def test_forced_slots_lists_the_overridden_entries():
    override = np.full((2, 3, 2), -1)
    override[1, 2] = [3, 0]
    assert routing.forced_slots(override) == [routing.ForcedSlot(1, 2, 0, 3), routing.ForcedSlot(1, 2, 1, 0)]
