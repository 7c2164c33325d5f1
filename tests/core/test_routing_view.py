"""core.routing_view: one layer's routing as frozen data with its CSV tables, experts switched off as the
Interventions value both panels send, and the what-if comparison."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from core import routing
from core.interventions import Interventions
from core.routing_view import expert_ticks, layer_routing, switch_expert, whatif_comparison
from core.runners import NumpyRunner, OnnxRunner
from core.session import analyse

TEXT = "The cat sat on the mat and looked at the door."


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def trace(analysed):
    return analysed(TEXT)


def test_layer_routing_reads_the_traces_layer(trace):
    lt = trace.layers[1]
    view = layer_routing(trace, 1)
    assert (view.layer, view.k, view.n_experts) == (1, lt.expert_ids.shape[1], trace.config.num_local_experts)
    np.testing.assert_array_equal(view.chosen, routing.chosen_mask(lt.expert_ids, view.n_experts))
    np.testing.assert_allclose(view.weights.sum(axis=1), 1.0, rtol=1e-6)
    assert view.forced == frozenset() and not view.off.any()
    assert view.convention_gap() < 1e-6


def test_router_csv_has_one_row_per_token_with_probs_chosen_weights_and_forced(trace):
    view = layer_routing(trace, 0)
    rows = read_csv(view.csv())
    assert [r["token"] for r in rows] == trace.labels()
    for t, row in enumerate(rows):
        for e in range(view.n_experts):
            assert float(row[f"prob_expert_{e}"]) == float(view.probs[t, e])
            assert row[f"chosen_expert_{e}"] == str(int(view.chosen[t, e]))
            assert float(row[f"weight_expert_{e}"]) == view.weights[t, e]
            assert row[f"forced_expert_{e}"] == "0"


def test_load_and_tokens_csv_count_every_slot(trace):
    view = layer_routing(trace, 1)
    load = read_csv(view.load_csv())
    assert sum(int(r["slots"]) for r in load) == view.expert_ids.size
    assert sum(float(r["share_of_topk_slots"]) for r in load) == pytest.approx(1.0)
    assert all(r["switched_off"] == "0" for r in load)
    tokens = read_csv(view.tokens_csv())
    assert len(tokens) == view.expert_ids.size
    assert all(int(r["expert"]) == view.expert_ids[int(r["position"]), int(r["slot"])] for r in tokens)


def test_switching_an_expert_off_keeps_the_other_ablations(bundle, trace):
    cfg = bundle.config
    head_mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    head_mask[0, 1] = 0
    ablated = analyse(NumpyRunner(bundle), TEXT, interventions=Interventions(head_mask=head_mask, ablate_mode="mean"))
    switched = switch_expert(ablated, 1, 2, on=False)
    assert switched.experts_off[1, 2] and switched.experts_off.sum() == 1
    np.testing.assert_array_equal(switched.head_mask, head_mask)
    assert switched.ablate_mode == "mean"
    assert switched.resid_patch is None and switched.expert_override is None   # ablations only


@pytest.mark.parametrize("runner_class", [NumpyRunner, OnnxRunner])
def test_an_expert_switched_off_is_never_selected_and_the_rest_renormalise(bundle, runner_class):
    runner = runner_class(bundle)
    plain = analyse(runner, TEXT)
    busiest = int(np.bincount(plain.layers[0].expert_ids.reshape(-1)).argmax())
    run = analyse(runner, TEXT, interventions=switch_expert(plain, 0, busiest, on=False))
    lt = run.layers[0]
    assert busiest not in lt.expert_ids
    np.testing.assert_allclose(lt.expert_weights.sum(axis=1), 1.0, rtol=1e-6)
    view = layer_routing(run, 0)
    assert view.off[busiest] and not view.off.sum() - 1
    assert view.convention_gap() < 1e-5      # top-k among the rest, either convention
    assert read_csv(view.load_csv())[busiest]["switched_off"] == "1"
    on_again = switch_expert(run, 0, busiest, on=True)
    assert not on_again.experts_off.any()


def test_switching_off_so_many_that_fewer_than_k_remain_is_refused(bundle, trace):
    cfg = bundle.config
    k, E = cfg.num_experts_per_tok, cfg.num_local_experts
    run = trace
    for e in range(E - k):
        run = analyse(NumpyRunner(bundle), TEXT, interventions=switch_expert(run, 0, e, on=False))
    with pytest.raises(ValueError, match=f"keep {k - 1} of {E} experts.*at least {k}"):
        switch_expert(run, 0, E - k, on=False)
    with pytest.raises(ValueError, match="no expert"):
        switch_expert(trace, cfg.num_hidden_layers, 0, on=False)


def test_forcing_ranks_switched_off_experts_last_and_refuses_forcing_one(trace):
    E = trace.config.num_local_experts
    logits = np.arange(E, dtype=np.float32)          # expert E-1 is the router's first choice
    off = np.zeros(E, bool)
    off[E - 2] = True
    row = routing.forced_row(logits, 2, expert=0, off=off)
    assert row.tolist() == [0, E - 3]                # E-1 replaced by 0; E-2 is off, so E-3 stays
    override = np.full((1, 1, 2), -1, np.int64)
    with pytest.raises(ValueError, match="switched off"):
        routing.force_expert(override, logits, 0, 0, E - 2, off=off)


def test_whatif_comparison_lists_before_and_after_with_labels(bundle, trace):
    layer, position, expert = 1, 2, 0
    override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                    layer, position, expert)
    after = analyse(NumpyRunner(bundle), TEXT, expert_override=override)
    comparison = whatif_comparison(trace, after, layer, position, expert, False)
    expected = routing.candidate_changes(trace.next_token_probs(position), after.next_token_probs(position), n=5)
    assert list(comparison.changes) == expected
    rows = read_csv(comparison.csv())
    assert [int(r["candidate_id"]) for r in rows] == [c.token_id for c in expected]
    assert [r["candidate"] for r in rows] == [trace.vocab_label(c.token_id) for c in expected]
    assert all(r["mode"] == "replace_first_choice" and r["forced_token"] == trace.label(position) for r in rows)


def test_cell_text_names_the_cell_and_what_the_router_did(bundle, trace):
    view = layer_routing(trace, 0)
    token, expert = 1, int(view.expert_ids[1, 0])
    text = view.cell_text(token, expert)
    assert f"“{trace.label(token)}” (position {token}) · expert {expert}" in text
    assert f"probability {view.probs[token, expert]:.4f}" in text and "chosen (slot 0)" in text
    unchosen = next(e for e in range(view.n_experts) if e not in view.expert_ids[token])
    assert view.cell_text(token, unchosen).endswith("not chosen")
    off = layer_routing(analyse(NumpyRunner(bundle), TEXT, interventions=switch_expert(trace, 0, unchosen, False)), 0)
    assert off.cell_text(token, unchosen).endswith("switched off")


# ---------------------------------------------------------------- numbering many expert columns

def _kept(ticks: list[tuple[int, str]]) -> list[int]:
    return [expert for expert, _ in ticks]


def test_expert_numbers_are_all_there_while_each_fits_its_column():
    assert expert_ticks(np.zeros(8, bool), 1.0) == [(e, str(e)) for e in range(8)]


@pytest.mark.parametrize("n, room, every", [(32, 3.0, 4), (64, 5.5, 8), (64, 1.5, 2)])
def test_too_many_columns_number_every_nth_a_power_of_two(n, room, every):
    assert _kept(expert_ticks(np.zeros(n, bool), room)) == list(range(0, n, every))


@pytest.mark.parametrize("off_experts", [[5], [5, 6], [0, 31]])
def test_switched_off_experts_are_always_numbered_and_no_two_numbers_crowd(off_experts):
    off = np.zeros(32, bool)
    off[off_experts] = True
    ticks = expert_ticks(off, 3.0)
    kept = _kept(ticks)
    assert off_experts[0] in kept and f"{off_experts[0]}✕" in dict(ticks).values()
    assert all(b - a >= 3.0 for a, b in zip(kept, kept[1:]))
    assert all(text.endswith("✕") == bool(off[e]) for e, text in ticks)
