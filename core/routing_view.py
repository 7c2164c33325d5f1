"""The numbers behind the MoE routing panel, Qt-free: one layer's routing, its load, its CSV tables,
the experts switched off, and the what-if's before/after comparison.

T tokens, E experts, k experts per token. Everything is read from a Trace (core.routing does the
arithmetic); switching an expert off builds a new core.interventions.Interventions — the same value
the Interventions panel sends — so both panels change the one set of ablations in force.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from core import routing
from core.experiment_runs import ablations_only
from core.interventions import Interventions
from core.raw_export import csv_text
from core.trace import Trace

ABLATION_RULE = ("the router then picks its top-k among the remaining experts, weights renormalised to sum to 1")


# ---------------------------------------------------------------- one layer's routing

@dataclass(frozen=True)
class LayerRouting:
    """What the router did in one layer of one run, and what was forced or switched off there."""
    layer: int
    labels: tuple[str, ...]       # [T] token labels
    logits: np.ndarray            # [T, E] router logits
    probs: np.ndarray             # [T, E] softmax over all experts
    expert_ids: np.ndarray        # [T, k] the experts used, slot 0 first
    expert_weights: np.ndarray    # [T, k] their renormalised weights
    weights: np.ndarray           # [T, E] the weight each expert's output gets (0: not chosen)
    chosen: np.ndarray            # [T, E] bool
    forced: frozenset             # {(token, expert)} set by an expert_override
    off: np.ndarray               # [E] bool: switched off in this layer

    @property
    def n_experts(self) -> int:
        return self.probs.shape[1]

    @property
    def k(self) -> int:
        return self.expert_ids.shape[1]

    def load(self) -> routing.ExpertLoad:
        return routing.expert_load(self.expert_ids, self.probs)

    def tokens_per_expert(self) -> list[list[routing.RoutedToken]]:
        return routing.tokens_per_expert(self.expert_ids, self.expert_weights, self.n_experts)

    def convention_gap(self) -> float:
        """Largest difference between the weights used and mistral-inference's top-k-then-softmax
        (over the experts still on): both conventions give the same numbers."""
        logits = np.where(self.off, -np.inf, self.logits)
        _, mistral = routing.topk_softmax_weights(logits, self.k)
        return float(np.abs(mistral - self.expert_weights).max())

    def cell_text(self, token: int, expert: int) -> str:
        """What the hover line says about one cell."""
        slots = np.flatnonzero(self.expert_ids[token] == expert)
        used = (f"chosen (slot {slots[0]}), weight used {self.weights[token, expert]:.4f}" if slots.size
                else "switched off" if self.off[expert] else "not chosen")
        return (f"“{self.labels[token]}” (position {token}) · expert {expert}: router logit "
                f"{self.logits[token, expert]:.4f}, probability {self.probs[token, expert]:.4f}; {used}")

    def csv(self) -> str:
        """One row per token: probabilities, chosen flags, weights used, forced flags."""
        experts = range(self.n_experts)
        rows = [["layer", "position", "token"] + [f"prob_expert_{e}" for e in experts]
                + [f"chosen_expert_{e}" for e in experts] + [f"weight_expert_{e}" for e in experts]
                + [f"forced_expert_{e}" for e in experts]]
        for t, label in enumerate(self.labels):
            rows.append([self.layer, t, label] + [repr(float(p)) for p in self.probs[t]]
                        + [int(c) for c in self.chosen[t]] + [repr(float(w)) for w in self.weights[t]]
                        + [int((t, e) in self.forced) for e in experts])
        return csv_text(rows)

    def load_csv(self) -> str:
        load = self.load()
        rows = [["layer", "expert", "switched_off", "slots", "share_of_topk_slots", "mean_router_probability"]]
        for e in range(self.n_experts):
            rows.append([self.layer, e, int(self.off[e]), int(load.counts[e]), repr(float(load.share[e])),
                         repr(float(load.mean_prob[e]))])
        return csv_text(rows)

    def tokens_csv(self) -> str:
        rows = [["layer", "expert", "position", "token", "slot", "weight"]]
        for e, tokens in enumerate(self.tokens_per_expert()):
            rows += [[self.layer, e, r.position, self.labels[r.position], r.slot, repr(r.weight)] for r in tokens]
        return csv_text(rows)


def layer_routing(trace: Trace, layer: int) -> LayerRouting:
    lt = trace.layers[layer]
    n_experts = lt.router_probs.shape[1]
    return LayerRouting(
        layer=layer, labels=tuple(trace.labels()), logits=lt.router_logits, probs=lt.router_probs,
        expert_ids=lt.expert_ids, expert_weights=lt.expert_weights,
        weights=routing.weight_matrix(lt.expert_ids, lt.expert_weights, n_experts),
        chosen=routing.chosen_mask(lt.expert_ids, n_experts),
        forced=frozenset((f.position, f.expert) for f in routing.forced_slots(trace.expert_override)
                         if f.layer == layer),
        off=experts_off(trace)[layer])


def expert_ticks(off: np.ndarray, columns_per_label: float) -> list[tuple[int, str]]:  # off: [E] bool
    """The experts numbered under a row of E columns when a number needs `columns_per_label` columns:
    the switched-off ones first ("3✕"), then every n-th (n a power of two: 0, 8, 16...), each only if
    no number kept is closer than a label's width. 8, 32 or 64 narrow columns keep numbers that can be
    read (of two neighbours switched off in narrow columns, the first is numbered)."""
    room = max(1.0, columns_per_label)
    every = 1 << math.ceil(math.log2(room))
    kept: list[int] = []
    for expert in [*np.flatnonzero(off).tolist(), *range(0, len(off), every)]:
        if all(abs(expert - other) >= room for other in kept):
            kept.append(expert)
    return [(e, f"{e}✕" if off[e] else str(e)) for e in sorted(kept)]


# ---------------------------------------------------------------- switching experts off

def experts_off(trace: Trace) -> np.ndarray:  # -> [L, E] bool: what the run had switched off
    cfg = trace.config
    shape = (cfg.num_hidden_layers, cfg.num_local_experts)
    off = trace.interventions.experts_off if trace.interventions is not None else None
    return np.zeros(shape, bool) if off is None else np.array(off, bool)


def switch_expert(trace: Trace, layer: int, expert: int, on: bool) -> Interventions:
    """The ablations in force for `trace`, with one expert switched on or off in one layer.

    Raises ValueError (a sentence for the user) when fewer than k experts would remain on: the router
    could not fill its top-k.
    """
    cfg = trace.config
    if not (0 <= layer < cfg.num_hidden_layers and 0 <= expert < cfg.num_local_experts):
        raise ValueError(f"there is no expert {layer}.{expert}: layers 0-{cfg.num_hidden_layers - 1}, "
                         f"experts 0-{cfg.num_local_experts - 1}")
    off = experts_off(trace)
    off[layer, expert] = not on
    remaining, k = cfg.num_local_experts - int(off[layer].sum()), cfg.num_experts_per_tok
    if remaining < k:
        raise ValueError(f"Expert {expert} stays on: layer {layer} would keep {remaining} of "
                         f"{cfg.num_local_experts} experts, and the router needs at least {k} for its top-{k}.")
    return replace(ablations_only(trace.interventions), experts_off=off)


# ---------------------------------------------------------------- the what-if: before and after

@dataclass(frozen=True)
class WhatIfComparison:
    """The next-token prediction at the forced token's position, before and after forcing it."""
    layer: int
    position: int
    token: str
    expert: int
    only_this_expert: bool
    changes: tuple[routing.CandidateChange, ...]
    candidate_labels: tuple[str, ...]     # the readable piece of each change's token

    def csv(self) -> str:
        rows = [["forced_layer", "forced_position", "forced_token", "forced_expert", "mode",
                 "candidate_id", "candidate", "prob_before", "prob_after", "change"]]
        mode = "only_this_expert" if self.only_this_expert else "replace_first_choice"
        for c, label in zip(self.changes, self.candidate_labels):
            rows.append([self.layer, self.position, self.token, self.expert, mode,
                         c.token_id, label, repr(c.before), repr(c.after), repr(c.delta)])
        return csv_text(rows)


def whatif_comparison(before: Trace, after: Trace, layer: int, position: int, expert: int,
                      only_this_expert: bool, n: int = 5) -> WhatIfComparison:
    changes = routing.candidate_changes(before.next_token_probs(position), after.next_token_probs(position), n=n)
    return WhatIfComparison(layer, position, before.label(position), expert, only_this_expert, tuple(changes),
                            tuple(before.vocab_label(c.token_id) for c in changes))
