"""The NumPy reference forward pass of a miniature Mixtral, readable top to bottom.

Primitives first, then attention, the mixture of experts (or the dense SwiGLU MLP of Llama,
Mistral and Qwen), one block, the whole model. The family options (config.py) are small branches:
q/k/v biases, per-head q/k RMSNorm, RoPE scaling, a sliding window, an explicit head size.
Weights arrive as a flat dict under Hugging Face Mixtral state-dict names, PyTorch
Linear orientation ([out_features, in_features]), so ``linear(x, w) = x @ w.T``.

Everything is float32; every intermediate a panel shows is returned, not just logits.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from core.attention_summary import SUMMARY_FIELDS, summaries
from core.config import ModelConfig
from core.interventions import Interventions

Weights = Mapping[str, np.ndarray]
F32 = np.float32


# ---------------------------------------------------------------- primitives

def linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:  # [T, in], [out, in] -> [T, out]
    return x @ w.T


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:  # [T, D] -> [T, D]
    # Mixtral's RMSNorm: no mean subtraction, no bias; eps inside the root.
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return (x / np.sqrt(variance + F32(eps))).astype(F32) * w


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    # Subtracting the max keeps exp finite; -inf (masked) entries become exactly 0.
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (F32(1) + np.exp(-x))


# ---------------------------------------------------------------- RoPE

def rope_inv_freq(head_dim: int, theta: float, scaling: tuple = ()) -> np.ndarray:  # -> [Dh/2]
    # theta_i = base^(-2i/Dh): pair i turns by m * theta_i at position m; low i spins fast.
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return scale_inv_freq(inv_freq, dict(scaling)).astype(F32)


def scale_inv_freq(inv_freq: np.ndarray, scaling: dict) -> np.ndarray:  # [Dh/2] -> [Dh/2]
    """RoPE scaling as Hugging Face computes it: linear divides every frequency, llama3 only the slow ones."""
    kind = scaling.get("rope_type", "default")
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind != "llama3":
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv_freq
    # long wavelengths (slow pairs) are stretched by factor, short ones kept, the band between blended
    scaled = np.where(wavelen > old_context / low, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_context / high) & (wavelen <= old_context / low)
    return np.where(medium, blended, scaled)


def rope_angles(positions: np.ndarray, head_dim: int, theta: float,
                scaling: tuple = ()) -> np.ndarray:  # [T] -> [T, Dh/2]
    return positions.astype(F32)[:, None] * rope_inv_freq(head_dim, theta, scaling)[None, :]


def rotate_half(x: np.ndarray) -> np.ndarray:  # [..., Dh] -> [..., Dh]
    # The rotate-half pairing: dimension i turns together with dimension i + Dh/2.
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x: np.ndarray, positions: np.ndarray, theta: float,
               scaling: tuple = ()) -> np.ndarray:  # [H, T, Dh] -> [H, T, Dh]
    angles = rope_angles(positions, x.shape[-1], theta, scaling)
    cos = np.cos(np.concatenate([angles, angles], axis=-1))  # [T, Dh]
    sin = np.sin(np.concatenate([angles, angles], axis=-1))
    return x * cos + rotate_half(x) * sin


# ---------------------------------------------------------------- attention

def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:  # [T, n*Dh] -> [n, T, Dh]
    t, width = x.shape
    return x.reshape(t, n_heads, width // n_heads).transpose(1, 0, 2)


def repeat_kv(x: np.ndarray, n_rep: int) -> np.ndarray:  # [Hkv, T, Dh] -> [Hkv*n_rep, T, Dh]
    # Grouped-query attention: query head h reads key/value head h // n_rep.
    return np.repeat(x, n_rep, axis=0)


def causal_scores(q: np.ndarray, k: np.ndarray, window: int = 0) -> np.ndarray:  # [H, T, Dh] x2 -> [H, T, T]
    t, head_dim = q.shape[1], q.shape[2]
    scores = (q @ k.transpose(0, 2, 1)) / F32(np.sqrt(head_dim))
    hidden = np.triu(np.ones((t, t), dtype=bool), k=1)  # key j > query i is not yet written
    if window:  # Mistral's sliding window: query i sees keys i - window < j <= i
        hidden |= np.tril(np.ones((t, t), dtype=bool), k=-window)
    return np.where(hidden, F32(-np.inf), scores).astype(F32)


def project(x: np.ndarray, w: Weights, name: str, bias: bool) -> np.ndarray:  # [T, in] -> [T, out]
    y = linear(x, w[f"{name}.weight"])
    return y + w[f"{name}.bias"] if bias else y


def attention(x: np.ndarray, w: Weights, p: str, cfg: ModelConfig, head_mask: np.ndarray,
              ablate_mean: bool = False, head_patch: tuple | None = None) -> dict[str, np.ndarray]:  # [T, D] -> parts, attn_out [T, D]
    h, hkv = cfg.num_attention_heads, cfg.num_key_value_heads
    positions = np.arange(x.shape[0])
    # QKV: one projection each; k and v may have fewer heads (GQA)
    q = split_heads(project(x, w, f"{p}.q_proj", cfg.qkv_bias), h)
    k = split_heads(project(x, w, f"{p}.k_proj", cfg.qkv_bias), hkv)
    v = repeat_kv(split_heads(project(x, w, f"{p}.v_proj", cfg.qkv_bias), hkv), h // hkv)
    if cfg.qk_norm:  # Qwen3: each head's q and k RMS-normalised over its own Dh dimensions
        q = rms_norm(q, w[f"{p}.q_norm.weight"], cfg.rms_norm_eps)
        k = rms_norm(k, w[f"{p}.k_norm.weight"], cfg.rms_norm_eps)
    k = repeat_kv(k, h // hkv)
    # RoPE relative positional embeddings: rotate q and k, never v
    q_rot = apply_rope(q, positions, cfg.rope_theta, cfg.rope_scaling)
    k_rot = apply_rope(k, positions, cfg.rope_theta, cfg.rope_scaling)
    # scaled, causally masked dot products, then softmax over keys
    scores = causal_scores(q_rot, k_rot, cfg.sliding_window)
    attn = softmax(scores)
    # each head's weighted sum of values; the head mask scales a head's contribution
    head_out = ablate_heads(attn @ v, head_mask, ablate_mean)  # [H, T, Dh]
    if head_patch is not None:
        head_out = patched(head_out, *head_patch)
    concat = head_out.transpose(1, 0, 2).reshape(x.shape[0], -1)  # [T, H*Dh]
    attn_out = project(concat, w, f"{p}.o_proj", cfg.o_bias)
    return dict(q=q, k=k, v=v, q_rot=q_rot, k_rot=k_rot, scores=scores, attn=attn,
                head_out=head_out, attn_out=attn_out)


# ---------------------------------------------------------------- mixture of experts

def swiglu_expert(x: np.ndarray, w: Weights, p: str) -> np.ndarray:  # [n, D] -> [n, D]
    return linear(silu(linear(x, w[f"{p}.w1.weight"])) * linear(x, w[f"{p}.w3.weight"]), w[f"{p}.w2.weight"])


def route(router_logits: np.ndarray, k: int, override: np.ndarray | None,
          off: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [T, E] -> probs, ids [T, k], weights [T, k]
    # Hugging Face order: softmax over all experts, keep the top k, renormalise them to sum 1.
    # (mistral-inference takes the top k logits and softmaxes those: the same numbers.)
    probs = softmax(router_logits)
    # an expert switched off (off [E] True) ranks last, so the top k come from the remaining ones
    ranked = router_logits if off is None else np.where(off, -np.inf, router_logits)
    ids = np.argsort(-ranked, axis=-1, kind="stable")[:, :k].astype(np.int64)
    if override is not None:  # a forced expert (>= 0) replaces the router's choice in that slot
        ids = np.where(override >= 0, override, ids)
    chosen = np.take_along_axis(probs, ids, axis=-1)
    return probs, ids, chosen / chosen.sum(axis=-1, keepdims=True)


def moe(x: np.ndarray, w: Weights, p: str, cfg: ModelConfig, override: np.ndarray | None,
        off: np.ndarray | None = None, expert_patch: tuple | None = None) -> dict[str, np.ndarray]:  # [T, D] -> parts, moe_out [T, D]
    router_logits = linear(x, w[f"{p}.gate.weight"])
    router_probs, expert_ids, expert_weights = route(router_logits, cfg.num_experts_per_tok, override, off)
    if expert_patch is not None:  # patching works on each expert's term, so the terms are kept apart
        out = patched(expert_terms(x, w, p, cfg, expert_ids, expert_weights), *expert_patch).sum(axis=0)
        return dict(router_logits=router_logits, router_probs=router_probs, expert_ids=expert_ids,
                    expert_weights=expert_weights, moe_out=out)
    out = np.zeros_like(x)
    for e in range(cfg.num_local_experts):  # sparse: each expert sees only the tokens routed to it
        rows, slots = np.nonzero(expert_ids == e)
        if rows.size:
            y = swiglu_expert(x[rows], w, f"{p}.experts.{e}")
            np.add.at(out, rows, expert_weights[rows, slots, None] * y)
    return dict(router_logits=router_logits, router_probs=router_probs, expert_ids=expert_ids,
                expert_weights=expert_weights, moe_out=out)


def dense_mlp(x: np.ndarray, w: Weights, p: str) -> dict[str, np.ndarray]:  # [T, D] -> parts, moe_out [T, D]
    """Llama's SwiGLU MLP, down(silu(gate x) * up x); the router fields are empty (E = k = 0)."""
    hidden = silu(linear(x, w[f"{p}.gate_proj.weight"])) * linear(x, w[f"{p}.up_proj.weight"])
    t = x.shape[0]
    return dict(router_logits=np.zeros((t, 0), F32), router_probs=np.zeros((t, 0), F32),
                expert_ids=np.zeros((t, 0), np.int64), expert_weights=np.zeros((t, 0), F32),
                moe_out=linear(hidden, w[f"{p}.down_proj.weight"]))


# ---------------------------------------------------------------- interventions (core.interventions)

def patched(x: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:  # [..., T, W], same, [..., T] -> [..., T, W]
    """x with the rows where mask is True replaced by values; every other row untouched, bit for bit."""
    return np.where(mask[..., None], values, x)


def ablate_heads(head_out: np.ndarray, head_mask: np.ndarray, mean: bool) -> np.ndarray:  # [H, T, Dh], [H] -> [H, T, Dh]
    """Scale each head by its mask; with mean ablation the removed share is its mean output over the T positions."""
    scaled = head_out * head_mask[:, None, None]
    if not mean:
        return scaled
    return scaled + (F32(1) - head_mask)[:, None, None] * head_out.mean(axis=1, keepdims=True)


def expert_terms(x: np.ndarray, w: Weights, p: str, cfg: ModelConfig, expert_ids: np.ndarray,
                 expert_weights: np.ndarray) -> np.ndarray:  # [T, D], [T, k] x2 -> [E, T, D]
    """Each expert's weighted output, kept apart (0 for tokens not routed to it); their sum is moe_out."""
    terms = np.zeros((cfg.num_local_experts, *x.shape), F32)
    for e in range(cfg.num_local_experts):
        rows, slots = np.nonzero(expert_ids == e)
        if rows.size:
            np.add.at(terms[e], rows, expert_weights[rows, slots, None] * swiglu_expert(x[rows], w, f"{p}.experts.{e}"))
    return terms


def patch_stage(x: np.ndarray, iv: Interventions | None, stage: int) -> np.ndarray:  # [T, D] -> [T, D]
    if iv is None or not iv.patches("resid_patch"):
        return x
    return patched(x, iv.resid_patch[stage], iv.resid_patch_mask[stage])


def attention_interventions(iv: Interventions | None, l: int) -> dict:
    if iv is None:
        return {}
    head_patch = (iv.head_patch[l], iv.head_patch_mask[l]) if iv.patches("head_patch") else None
    return dict(ablate_mean=iv.mean_ablation, head_patch=head_patch)


def moe_interventions(iv: Interventions | None, l: int) -> dict:
    if iv is None:
        return {}
    expert_patch = (iv.expert_patch[l], iv.expert_patch_mask[l]) if iv.patches("expert_patch") else None
    return dict(off=iv.experts_off[l] if iv.switches_experts_off() else None, expert_patch=expert_patch)


# ---------------------------------------------------------------- block and model

def block(h: np.ndarray, w: Weights, l: int, cfg: ModelConfig, head_mask: np.ndarray,
          override: np.ndarray | None, iv: Interventions | None = None) -> dict[str, np.ndarray]:  # [T, D] -> parts, resid_post [T, D]
    p = f"model.layers.{l}"
    # pre-norm attention with a residual connection
    attn_in = rms_norm(h, w[f"{p}.input_layernorm.weight"], cfg.rms_norm_eps)
    a = attention(attn_in, w, f"{p}.self_attn", cfg, head_mask, **attention_interventions(iv, l))
    resid_mid = patch_stage(h + a["attn_out"], iv, 1 + 2 * l)
    # pre-norm mixture of experts with a residual connection
    moe_in = rms_norm(resid_mid, w[f"{p}.post_attention_layernorm.weight"], cfg.rms_norm_eps)
    m = (moe(moe_in, w, f"{p}.block_sparse_moe", cfg, override, **moe_interventions(iv, l)) if cfg.is_moe
         else dense_mlp(moe_in, w, f"{p}.mlp"))  # a dense model has no experts to switch off or patch
    return dict(attn_in=attn_in, **a, resid_mid=resid_mid, moe_in=moe_in, **m,
                resid_post=patch_stage(resid_mid + m["moe_out"], iv, 2 + 2 * l))


def lm_head_weight(w: Weights, cfg: ModelConfig) -> np.ndarray:  # -> [V, D]
    return w["model.embed_tokens.weight"] if cfg.tie_word_embeddings else w["lm_head.weight"]


def forward(ids: np.ndarray, w: Weights, cfg: ModelConfig, head_mask: np.ndarray | None = None,
            expert_override: np.ndarray | None = None, interventions: Interventions | None = None, keep=None,
            logits_from: int = 0) -> dict:  # [T] -> {embed, layers: [...], final_norm, logits [T - logits_from, V]}
    """Run the model on token ids; head_mask [L, H] scales heads, expert_override [L, T, k] forces experts (-1 = router's pick);
    `interventions` (core.interventions) carries those two and every other intervention in one value.

    keep (a set of output names, e.g. "layers.3.attn") drops every other layer part as soon as the
    next layer no longer needs it, so a large model need not hold every layer's T x T attention; it may
    name a layer's attention summaries (core.attention_summary), computed before its attn is dropped."""
    if interventions is None:
        interventions = Interventions(head_mask=head_mask, expert_override=expert_override)
    iv = interventions.filled(cfg, len(ids))
    h = w["model.embed_tokens.weight"][ids]  # token embedding: one table row per id
    h = patch_stage(h, iv, 0)
    embed, layers = h, []
    for l in range(cfg.num_hidden_layers):
        layer = block(h, w, l, cfg, iv.head_mask[l], iv.expert_override[l], iv)
        h = layer["resid_post"]
        if keep is not None and any(f"layers.{l}.{name}" in keep for name, _, _ in SUMMARY_FIELDS):
            layer.update(summaries(layer["attn"]))
        layers.append(layer if keep is None else {k: v for k, v in layer.items() if f"layers.{l}.{k}" in keep})
    final_norm = rms_norm(h, w["model.norm.weight"], cfg.rms_norm_eps)
    return dict(embed=embed, layers=layers, final_norm=final_norm,
                logits=linear(final_norm[logits_from:], lm_head_weight(w, cfg)))


def weight_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape — the contract between trainer, exporter and loader."""
    d, f, dh = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg.vocab_size, d)}
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}"
        shapes[f"{p}.input_layernorm.weight"] = (d,)
        shapes[f"{p}.self_attn.q_proj.weight"] = (cfg.num_attention_heads * dh, d)
        shapes[f"{p}.self_attn.k_proj.weight"] = (cfg.num_key_value_heads * dh, d)
        shapes[f"{p}.self_attn.v_proj.weight"] = (cfg.num_key_value_heads * dh, d)
        shapes[f"{p}.self_attn.o_proj.weight"] = (d, cfg.num_attention_heads * dh)
        shapes.update(_attention_option_shapes(cfg, f"{p}.self_attn"))
        shapes[f"{p}.post_attention_layernorm.weight"] = (d,)
        if not cfg.is_moe:
            shapes[f"{p}.mlp.gate_proj.weight"] = (f, d)
            shapes[f"{p}.mlp.up_proj.weight"] = (f, d)
            shapes[f"{p}.mlp.down_proj.weight"] = (d, f)
            continue
        shapes[f"{p}.block_sparse_moe.gate.weight"] = (cfg.num_local_experts, d)
        for e in range(cfg.num_local_experts):
            q = f"{p}.block_sparse_moe.experts.{e}"
            shapes[f"{q}.w1.weight"] = (f, d)
            shapes[f"{q}.w2.weight"] = (d, f)
            shapes[f"{q}.w3.weight"] = (f, d)
    shapes["model.norm.weight"] = (d,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, d)
    return shapes


def _attention_option_shapes(cfg: ModelConfig, p: str) -> dict[str, tuple[int, ...]]:
    h, hkv, dh = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    shapes: dict[str, tuple[int, ...]] = {}
    if cfg.qkv_bias:
        shapes.update({f"{p}.q_proj.bias": (h * dh,), f"{p}.k_proj.bias": (hkv * dh,), f"{p}.v_proj.bias": (hkv * dh,)})
    if cfg.o_bias:
        shapes[f"{p}.o_proj.bias"] = (cfg.hidden_size,)
    if cfg.qk_norm:
        shapes.update({f"{p}.q_norm.weight": (dh,), f"{p}.k_norm.weight": (dh,)})
    return shapes


def random_weights(cfg: ModelConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """A randomly initialised model (norms at 1, linears ~ N(0, 1/fan_in)) for tests and the placeholder bundle."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in weight_shapes(cfg).items():
        if name.endswith(".bias"):
            weights[name] = (0.1 * rng.standard_normal(shape)).astype(F32)
        elif len(shape) == 1:
            weights[name] = np.ones(shape, F32)
        else:
            weights[name] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(F32)
    return weights
