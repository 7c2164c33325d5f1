"""Head roles: what each attention head does, scored on the sentence and on a fixed probe.

Every role is a set of heatmap cells (query, key) chosen from the token ids alone; a head's score
is the attention it puts on those cells, summed per query and averaged over the queries that have
at least one. So a score is in [0, 1], 1 for a head that does nothing else, and the cells are the
evidence a panel can outline. A role no query qualifies for (no repeated token, one token) is
undefined: its score is NaN and the evidence says why, never 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from core.raw_export import csv_text
from core.trace import Trace
from core.training.evaluate import PROBE_REPEATS, PROBE_SEED, induction_probes, probe_period

ROLE_NAMES: tuple[str, ...] = ("previous_token", "self", "first_token", "duplicate_token", "induction")

# One sentence per role: what the panel's tooltip and the README show.
ROLE_DEFINITIONS: dict[str, str] = {
    "previous_token": "Mean attention from each token to the token just before it (every token but the first).",
    "self": "Mean attention from each token to itself (every token but the first, which can only attend to itself).",
    "first_token": "Mean attention from each token to the first token, the usual attention 'sink' "
                   "(every token but the first).",
    "duplicate_token": "Over the tokens that occurred earlier in the text, mean attention to those earlier copies "
                       "of the same token.",
    "induction": "Over the tokens that occurred earlier in the text (not just before), mean attention to the "
                 "token that followed each earlier copy.",
}


@dataclass(frozen=True)
class RoleEvidence:
    """The cells one role is made of: attention from queries[n] to keys[n]."""
    role: str
    queries: np.ndarray   # [N] int64
    keys: np.ndarray      # [N] int64, keys[n] <= queries[n]
    reason: str = ""      # why the role is undefined here ("" when some query qualifies)

    @cached_property   # every score asks, twice (a frozen dataclass: kept in the instance's __dict__)
    def n_queries(self) -> int:
        return int(np.unique(self.queries).size)

    @property
    def defined(self) -> bool:
        return self.n_queries > 0


# ---------------------------------------------------------------- cells of each role

def _offset_cells(t: int, offset: int | None) -> tuple[np.ndarray, np.ndarray]:
    # queries 1..T-1; key = query - offset (offset None: key 0, the first token)
    queries = np.arange(1, t, dtype=np.int64)
    keys = np.zeros_like(queries) if offset is None else queries - offset
    return queries, keys


def _earlier_copies(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [T] -> query [N], earlier copy [N]
    i, j = np.nonzero((ids[:, None] == ids[None, :]) & np.tri(len(ids), k=-1, dtype=bool))
    return i.astype(np.int64), j.astype(np.int64)


def _induction_cells(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # the token after an earlier copy j is j + 1; j + 1 == i would be the query itself (a doubled token)
    i, j = _earlier_copies(ids)
    keep = j + 1 < i
    return i[keep], j[keep] + 1


_CELLS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "previous_token": lambda ids: _offset_cells(len(ids), 1),
    "self": lambda ids: _offset_cells(len(ids), 0),
    "first_token": lambda ids: _offset_cells(len(ids), None),
    "duplicate_token": _earlier_copies,
    "induction": _induction_cells,
}


def _undefined_reason(role: str, t: int) -> str:
    if t < 2:
        return "a single token has nothing earlier to attend to"
    if role == "duplicate_token":
        return "no token of the text repeats an earlier one"
    return "no token of the text repeats one that came earlier than just before it"


def role_evidence(ids: np.ndarray) -> dict[str, RoleEvidence]:  # [T] -> role -> cells
    """The cells of every role for this token sequence; they depend on the ids only, not on the model."""
    ids = np.asarray(ids).reshape(-1)
    out = {}
    for role in ROLE_NAMES:
        queries, keys = _CELLS[role](ids)
        out[role] = RoleEvidence(role, queries, keys, "" if queries.size else _undefined_reason(role, len(ids)))
    return out


# ---------------------------------------------------------------- scores

def role_score(attn: np.ndarray, evidence: RoleEvidence) -> np.ndarray:  # [..., T, T] -> [...]
    """Attention on the role's cells, summed per query, averaged over its queries; NaN if undefined."""
    lead = attn.shape[:-2]
    if not evidence.defined:
        return np.full(lead, np.nan)
    mass = attn[..., evidence.queries, evidence.keys].astype(np.float64).sum(axis=-1)
    return mass / evidence.n_queries


def score_roles(attn: np.ndarray, ids: np.ndarray,
                evidence: dict[str, RoleEvidence] | None = None) -> np.ndarray:  # [L, H, T, T], [T] -> [L, H, R]
    evidence = role_evidence(ids) if evidence is None else evidence   # given: the caller keeps it too
    return np.stack([role_score(attn, evidence[role]) for role in ROLE_NAMES], axis=-1)


def stacked_attention(trace: Trace) -> np.ndarray:  # -> [L, H, T, T]
    return np.stack([layer.attn for layer in trace.layers])


@dataclass(frozen=True)
class HeadRoles:
    """Role scores of every head, with the cells behind them."""
    scores: np.ndarray                     # [L, H, R] float64, NaN where a role is undefined
    evidence: dict[str, RoleEvidence]      # of the sequence the scores were measured on
    role_names: tuple[str, ...] = ROLE_NAMES

    def score(self, layer: int, head: int, role: str) -> float:
        return float(self.scores[layer, head, self.role_names.index(role)])

    def best_heads(self, role: str, n: int = 3) -> list[tuple[int, int, float]]:
        """The n highest-scoring (layer, head, score) for a role; empty if it is undefined."""
        flat = self.scores[..., self.role_names.index(role)]
        if np.isnan(flat).all():
            return []
        order = np.argsort(-np.nan_to_num(flat, nan=-np.inf), axis=None)[:n]
        return [(int(l), int(h), float(flat[l, h])) for l, h in zip(*np.unravel_index(order, flat.shape))]


ROLE_SOURCES = ("sentence", "probe")
ROLES_CSV_HEADER = ("layer", "head", *(f"{role}_{source}" for role in ROLE_NAMES for source in ROLE_SOURCES))


def roles_csv(sentence: HeadRoles, probe: HeadRoles | None) -> str:
    """layer, head, then every role's score on the sentence and on the probe (empty: undefined or no probe)."""
    rows: list[tuple] = [ROLES_CSV_HEADER]
    layers, heads = sentence.scores.shape[:2]
    for layer, head in np.ndindex(layers, heads):
        cells = []
        for role in ROLE_NAMES:
            for roles in (sentence, probe):
                score = np.nan if roles is None else roles.score(layer, head, role)
                cells.append("" if np.isnan(score) else repr(score))
        rows.append((layer, head, *cells))
    return csv_text(rows)


def evidence_csv(trace: Trace, evidence: RoleEvidence, layer: int, head: int, role: str) -> str:
    """The cells a head's role score is made of: query, key, their pieces and the head's attention there."""
    attn = trace.layers[layer].attn[head]
    rows: list[tuple] = [("layer", "head", "role", "query", "query_piece", "key", "key_piece", "attention")]
    for query, key in zip(evidence.queries, evidence.keys):
        rows.append((layer, head, role, int(query), trace.label(int(query)), int(key), trace.label(int(key)),
                     repr(float(attn[query, key]))))
    return csv_text(rows)


def sentence_roles(trace: Trace) -> HeadRoles:
    """Every head's role scores on the trace's own sentence."""
    evidence = role_evidence(trace.input_ids)
    return HeadRoles(score_roles(stacked_attention(trace), trace.input_ids, evidence), evidence)


def probe_roles(runner, n_repeats: int = PROBE_REPEATS, seed: int = PROBE_SEED) -> HeadRoles:
    """Role scores on the bundle's fixed probe (eval's repeated random sequences), averaged over its
    sequences; the evidence shown is that of the first sequence (all share its diagonal structure)."""
    bundle = runner.bundle
    cfg = bundle.config
    probes = induction_probes(bundle.tokenizer, cfg.vocab_size, probe_period(cfg.max_position_embeddings),
                              n_repeats, seed)
    scores = np.mean([score_roles(stacked_attention(runner.run(ids, fields=("attn",))), ids)   # all it reads
                      for ids in probes], axis=0)
    return HeadRoles(scores, role_evidence(probes[0]))
