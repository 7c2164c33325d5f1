"""Direct logit attribution: which component wrote a token's logit at one position.

The residual stream at position P after the last layer is a sum of parts: the token embedding,
every head's output through its own slice of W_O, and every chosen expert's output times its
routing weight. The logit is RMSNorm(sum) · W_U[target]; RMSNorm divides by the root-mean-square
of the *whole* sum, which is not linear in the parts. Holding that scale fixed makes it linear:
each part's contribution is part · (norm weight / rms) · W_U[target], and the contributions add
up exactly to the logit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.model import lm_head_weight, swiglu_expert
from core.raw_export import csv_text
from core.trace import Trace

HELD_FIXED = ("Held fixed: the final RMSNorm's division by the root-mean-square of the whole residual "
              "stream at this position is computed once and applied to every part alike, so each part "
              "is scored by the same linear map and the parts add up to the logit.")


@dataclass(frozen=True)
class Attribution:
    names: tuple[str, ...]      # `embed`, then per layer `L{l}.H{h}` for each head, `L{l}.E{e}` for each expert
    values: np.ndarray          # [N] float64 contributions to the logit (or logit difference)
    logit: float                # the model's logit of target at position (minus that of `versus`)
    position: int
    target: int
    versus: int | None = None   # the token subtracted, for a logit difference

    def sorted(self) -> list[tuple[str, float]]:
        """(name, value) from the largest positive to the most negative contribution."""
        order = np.argsort(-self.values, kind="stable")
        return [(self.names[i], float(self.values[i])) for i in order]

    def csv(self) -> str:
        """One row per part, as the panel draws them (largest first): part, kind, layer, index, contribution."""
        rows: list[tuple] = [("rank", "part", "kind", "layer", "index", "contribution")]
        for rank, (name, value) in enumerate(self.sorted(), start=1):
            kind, layer, index = part_kind(name)
            rows.append((rank, name, kind, "" if layer is None else layer, "" if index is None else index,
                         repr(value)))
        return csv_text(rows)

    def total_csv(self) -> str:
        """What the parts add up to: the position, the tokens, the model's logit and the sum of the parts."""
        return csv_text([("position", "target_id", "versus_id", "logit", "sum_of_parts"),
                         (self.position, self.target, "" if self.versus is None else self.versus,
                          repr(self.logit), repr(float(np.sum(self.values))))])


def part_kind(name: str) -> tuple[str, int | None, int | None]:
    """'embed' -> ('embed', None, None); 'L1.H2' -> ('head', 1, 2); 'L0.E3' -> ('expert', 0, 3);
    a dense model's 'L0.MLP' -> ('mlp', 0, None); o_proj's bias 'L0.attn_bias' -> ('attn_bias', 0, None)."""
    if name == "embed":
        return "embed", None, None
    layer, part = name.split(".")
    if part in ("MLP", "attn_bias"):
        return part.lower(), int(layer[1:]), None
    return ("head" if part[0] == "H" else "expert"), int(layer[1:]), int(part[1:])


def part_names(num_layers: int, num_heads: int, num_experts: int, o_bias: bool = False) -> tuple[str, ...]:
    """embed, then per layer each head (and o_proj's bias where the model has one), then each expert,
    or the layer's one dense MLP (num_experts 0)."""
    names = ["embed"]
    for l in range(num_layers):
        names += [f"L{l}.H{h}" for h in range(num_heads)] + ([f"L{l}.attn_bias"] if o_bias else [])
        names += [f"L{l}.E{e}" for e in range(num_experts)] if num_experts else [f"L{l}.MLP"]
    return tuple(names)


def readout_direction(trace: Trace, position: int, target: int, versus: int | None) -> np.ndarray:  # -> [D]
    """The linear map from a residual part to its logit share: W_U row(s) times the norm weight over P's rms."""
    cfg, w = trace.config, trace.weights
    unembed = lm_head_weight(w, cfg).astype(np.float64)
    row = unembed[target] - (unembed[versus] if versus is not None else 0.0)
    resid = trace.layers[-1].resid_post[position].astype(np.float64)
    inv_rms = 1.0 / np.sqrt(np.mean(resid * resid) + cfg.rms_norm_eps)  # the scale held fixed
    return row * w["model.norm.weight"].astype(np.float64) * inv_rms


def head_parts(trace: Trace, layer: int, position: int) -> np.ndarray:  # -> [H, D]
    """Each head's output at P through its own Dh columns of W_O (they sum to attn_out[P])."""
    cfg = trace.config
    dh = cfg.head_dim
    o_proj = trace.weights[f"model.layers.{layer}.self_attn.o_proj.weight"].astype(np.float64)  # [D, H*Dh]
    heads = trace.layers[layer].head_out[:, position].astype(np.float64)                       # [H, Dh]
    return np.stack([o_proj[:, h * dh:(h + 1) * dh] @ heads[h] for h in range(cfg.num_attention_heads)])


def expert_parts(trace: Trace, layer: int, position: int) -> np.ndarray:  # -> [E, D]
    """Each expert's output at P, recomputed from the weights, times its routing weight (0 if not chosen)."""
    cfg, lt = trace.config, trace.layers[layer]
    x = lt.moe_in[position][None].astype(np.float64)  # [1, D]
    parts = np.zeros((cfg.num_local_experts, cfg.hidden_size))
    for expert, weight in zip(lt.expert_ids[position], lt.expert_weights[position]):
        y = swiglu_expert(x, trace.weights, f"model.layers.{layer}.block_sparse_moe.experts.{int(expert)}")[0]
        parts[int(expert)] += float(weight) * y  # an override may put one expert in two slots: both count
    return parts


def residual_parts(trace: Trace, position: int) -> np.ndarray:  # -> [N, D], in part_names order
    cfg = trace.config
    parts = [trace.embed[position][None].astype(np.float64)]
    for l in range(trace.num_layers):
        parts.append(head_parts(trace, l, position))
        if cfg.o_bias:  # written at every position whatever the heads do: a part of its own
            parts.append(trace.weights[f"model.layers.{l}.self_attn.o_proj.bias"][None].astype(np.float64))
        # a dense MLP is one part: its output at P is in the trace
        parts.append(expert_parts(trace, l, position) if cfg.is_moe
                     else trace.layers[l].moe_out[position][None].astype(np.float64))
    return np.concatenate(parts)


def check_target(trace: Trace, position: int, target: int | None = None, versus: int | None = None) -> int:
    """Validate a position (negative counts from the end) and token ids; return the position as 0..T-1."""
    t, v = trace.n_tokens, trace.config.vocab_size
    if not -t <= position < t:
        raise ValueError(f"position {position} is outside the text: choose 0..{t - 1} (or -{t}..-1 from the end)")
    for name, token in (("target", target), ("versus", versus)):
        if token is not None and not 0 <= token < v:
            raise ValueError(f"{name} token id {token} is outside the vocabulary: choose 0..{v - 1}")
    return position % t


def direct_logit_attribution(trace: Trace, position: int, target: int,
                             versus: int | None = None) -> Attribution:
    """Contributions of the embedding, each head and each expert to logit[position, target]
    (minus logit[position, versus] when given), with position's final-RMSNorm scale held fixed."""
    position = check_target(trace, position, target, versus)
    direction = readout_direction(trace, position, target, versus)
    values = residual_parts(trace, position) @ direction
    logits = trace.logits[position].astype(np.float64)
    logit = logits[target] - (logits[versus] if versus is not None else 0.0)
    cfg = trace.config
    names = part_names(trace.num_layers, cfg.num_attention_heads, cfg.num_local_experts, cfg.o_bias)
    return Attribution(names, values, float(logit), position, int(target), versus)
