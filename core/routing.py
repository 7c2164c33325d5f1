"""Reading a mixture-of-experts layer's routing, and asking "what if this token went elsewhere?".

Pure NumPy on the arrays a Trace already holds (T tokens, E experts, k experts per token);
nothing here runs the model. The routing itself is core.model.route: softmax over all
experts, keep the top k, renormalise those k probabilities to sum 1 (Hugging Face's order).
mistral-inference takes the top k logits and softmaxes only those; `topk_softmax_weights`
computes that way so a panel can show both give the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.model import softmax


# ---------------------------------------------------------------- reading one layer's routing

def chosen_mask(expert_ids: np.ndarray, num_experts: int) -> np.ndarray:  # [T, k] -> [T, E] bool
    """True where a token sends its vector to that expert."""
    mask = np.zeros((expert_ids.shape[0], num_experts), dtype=bool)
    np.put_along_axis(mask, expert_ids, True, axis=-1)
    return mask


def weight_matrix(expert_ids: np.ndarray, expert_weights: np.ndarray,
                  num_experts: int) -> np.ndarray:  # [T, k], [T, k] -> [T, E]
    """The weight each expert's output gets for each token (0 for experts not chosen).

    A forced routing can put one expert in two slots; its weights then add up, as the
    layer's output adds them up.
    """
    out = np.zeros((expert_ids.shape[0], num_experts), dtype=np.float64)
    rows = np.repeat(np.arange(expert_ids.shape[0]), expert_ids.shape[1])
    np.add.at(out, (rows, expert_ids.reshape(-1)), expert_weights.reshape(-1))
    return out


def topk_softmax_weights(router_logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:  # [T, E] -> ids, weights [T, k]
    """mistral-inference's order: take the k largest logits, softmax over just those k."""
    ids = np.argsort(-router_logits, axis=-1, kind="stable")[:, :k]
    return ids, softmax(np.take_along_axis(router_logits, ids, axis=-1).astype(np.float64))


@dataclass(frozen=True)
class ExpertLoad:
    counts: np.ndarray     # [E] how many of the T*k top-k slots went to each expert
    share: np.ndarray      # [E] counts / (T*k): sums to 1
    mean_prob: np.ndarray  # [E] the router probability averaged over tokens: also sums to 1


def expert_load(expert_ids: np.ndarray, router_probs: np.ndarray) -> ExpertLoad:  # [T, k], [T, E]
    num_experts = router_probs.shape[1]
    counts = np.bincount(expert_ids.reshape(-1), minlength=num_experts)
    share = counts / max(expert_ids.size, 1)
    return ExpertLoad(counts=counts, share=share, mean_prob=router_probs.astype(np.float64).mean(axis=0))


@dataclass(frozen=True)
class RoutedToken:
    position: int
    slot: int       # 0 = the token's first choice
    weight: float   # the renormalised weight the expert's output gets


def tokens_per_expert(expert_ids: np.ndarray, expert_weights: np.ndarray,
                      num_experts: int) -> list[list[RoutedToken]]:  # [T, k] x2 -> E lists
    """For each expert, the tokens routed to it, heaviest weight first (ties: earlier token first)."""
    routed: list[list[RoutedToken]] = [[] for _ in range(num_experts)]
    for position, slot in zip(*np.nonzero(expert_ids >= 0)):
        expert = int(expert_ids[position, slot])
        routed[expert].append(RoutedToken(int(position), int(slot), float(expert_weights[position, slot])))
    for tokens in routed:
        tokens.sort(key=lambda r: (-r.weight, r.position, r.slot))
    return routed


# ---------------------------------------------------------------- forced routing

@dataclass(frozen=True)
class ForcedSlot:
    layer: int
    position: int
    slot: int
    expert: int


def forced_slots(expert_override: np.ndarray) -> list[ForcedSlot]:  # [L, T, k] -> the entries >= 0
    return [ForcedSlot(int(l), int(t), int(s), int(expert_override[l, t, s]))
            for l, t, s in zip(*np.nonzero(expert_override >= 0))]


def forced_row(router_logits_row: np.ndarray, k: int, expert: int,
               only_this_expert: bool = False, off: np.ndarray | None = None) -> np.ndarray:  # [E] -> [k]
    """The k experts a forced token uses, `expert` first.

    Default: `expert` takes the place of the router's first choice and the router's other
    choices stay (if the router had already chosen `expert`, the set stays the same).
    only_this_expert: every slot is `expert`, so its output gets the whole weight.
    off [E] bool: experts switched off rank last, as in the router itself.
    """
    if only_this_expert:
        return np.full(k, expert, dtype=np.int64)
    ranked = router_logits_row if off is None else np.where(off, -np.inf, router_logits_row)
    top = [int(e) for e in np.argsort(-ranked, kind="stable")[:k]]  # the router's own order
    rest = [e for e in top if e != expert] if expert in top else top[1:]
    return np.asarray([expert, *rest], dtype=np.int64)


def force_expert(base_override: np.ndarray, router_logits_row: np.ndarray, layer: int, position: int,
                 expert: int, only_this_expert: bool = False,
                 off: np.ndarray | None = None) -> np.ndarray:  # [L, T, k] -> [L, T, k]
    """A new expert_override: base_override (e.g. the current trace's) with (layer, position) forced.

    router_logits_row [E] is that token's router output in that layer. Forcing it does not change
    it: the router reads only earlier layers and, through attention, earlier-or-same positions of
    this layer, none of which the override touches. off [E]: the layer's experts switched off.
    """
    override = np.array(base_override, dtype=np.int64, copy=True)
    num_layers, num_tokens, k = override.shape
    num_experts = router_logits_row.shape[0]
    if not (0 <= layer < num_layers and 0 <= position < num_tokens):
        raise ValueError(f"no token {position} in layer {layer} (the override has {num_layers} layers, "
                         f"{num_tokens} tokens)")
    if not 0 <= expert < num_experts:
        raise ValueError(f"expert must lie in [0, {num_experts}), got {expert}")
    if off is not None and off[expert]:
        raise ValueError(f"expert {layer}.{expert} is switched off: switch it on before forcing a token to it")
    override[layer, position] = forced_row(router_logits_row, k, expert, only_this_expert, off)
    return override


def changes_routing(current_ids_row: np.ndarray, forced: np.ndarray) -> bool:  # [k], [k]
    """Whether the forced experts differ, as a set, from what the token uses now.

    Moving an already-chosen expert to another slot changes nothing: the weights are
    renormalised over the same experts and the outputs are summed.
    """
    return sorted(int(e) for e in current_ids_row) != sorted(int(e) for e in forced)


def rerouted_positions(before_ids: list[np.ndarray], after_ids: list[np.ndarray]) -> list[tuple[int, int]]:
    """(layer, position) pairs whose chosen experts differ between two runs (per layer [T, k])."""
    changed = []
    for layer, (a, b) in enumerate(zip(before_ids, after_ids)):
        differ = np.any(np.sort(a, axis=-1) != np.sort(b, axis=-1), axis=-1)
        changed += [(layer, int(t)) for t in np.nonzero(differ)[0]]
    return changed


# ---------------------------------------------------------------- what the what-if did to the prediction

@dataclass(frozen=True)
class CandidateChange:
    token_id: int
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


def candidate_changes(before: np.ndarray, after: np.ndarray, n: int = 8) -> list[CandidateChange]:  # [V], [V]
    """The top-n candidates before, then any of the top-n after that were not among them."""
    top_before = np.argsort(-before, kind="stable")[:n]
    top_after = np.argsort(-after, kind="stable")[:n]
    ids = [int(i) for i in top_before] + [int(i) for i in top_after if i not in set(top_before.tolist())]
    return [CandidateChange(i, float(before[i]), float(after[i])) for i in ids]
