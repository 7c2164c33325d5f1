"""A PyTorch twin of core.model: same parameter names, same math, batched for training.

Parameter names are exactly ``core.model.weight_shapes(cfg)``, so ``state_dict()`` maps
one-to-one onto the weights core's ONNX exporter takes. The math is the reference's:
RMSNorm (eps inside the root), RoPE rotate-half, causal softmax(q·k/sqrt(Dh)), router
softmax over all experts -> top-k -> renormalise -> SwiGLU experts w2(silu(w1 x) * w3 x).
Experts run sparsely: each sees only the tokens routed to it (half the compute at top-2 of 4).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.config import ModelConfig
from core.model import rope_inv_freq, weight_shapes


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, dh = cfg.hidden_size, cfg.head_dim
        self.h, self.hkv, self.dh = cfg.num_attention_heads, cfg.num_key_value_heads, dh
        self.q_proj = nn.Linear(d, self.h * dh, bias=False)
        self.k_proj = nn.Linear(d, self.hkv * dh, bias=False)
        self.v_proj = nn.Linear(d, self.hkv * dh, bias=False)
        self.o_proj = nn.Linear(self.h * dh, d, bias=False)
        # Same inverse frequencies as the reference (computed in float64, rounded to float32).
        self.register_buffer("inv_freq", torch.from_numpy(rope_inv_freq(dh, cfg.rope_theta)), persistent=False)

    def rope(self, t: int, device) -> tuple[torch.Tensor, torch.Tensor]:  # -> cos, sin [T, Dh]
        angles = torch.arange(t, device=device, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, x: torch.Tensor, need_weights: bool = False):  # [B, T, D] -> [B, T, D] (, attn [B, H, T, T])
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.dh).transpose(1, 2)      # [B, H, T, Dh]
        k = self.k_proj(x).view(b, t, self.hkv, self.dh).transpose(1, 2)    # [B, Hkv, T, Dh]
        v = self.v_proj(x).view(b, t, self.hkv, self.dh).transpose(1, 2)
        if self.hkv != self.h:  # grouped-query: query head h reads kv head h // n_rep
            k = k.repeat_interleave(self.h // self.hkv, dim=1)
            v = v.repeat_interleave(self.h // self.hkv, dim=1)
        cos, sin = self.rope(t, x.device)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        attn = None
        if need_weights:  # the explicit path, for monitoring heads
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
            out = attn @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).reshape(b, t, self.h * self.dh)
        return self.o_proj(out), attn


class Expert(nn.Module):
    def __init__(self, d: int, f: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)
        self.w3 = nn.Linear(d, f, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [n, D] -> [n, D]
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoE(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.k, self.e = cfg.num_experts_per_tok, cfg.num_local_experts
        self.gate = nn.Linear(cfg.hidden_size, self.e, bias=False)
        self.experts = nn.ModuleList(Expert(cfg.hidden_size, cfg.intermediate_size) for _ in range(self.e))

    def forward(self, x: torch.Tensor):  # [B, T, D] -> out [B, T, D], aux loss, load [E]
        shape = x.shape
        flat = x.reshape(-1, shape[-1])                      # [N, D]
        probs = self.gate(flat).softmax(-1)                  # [N, E] softmax over all experts
        top_w, top_i = probs.topk(self.k, dim=-1)            # [N, k]
        top_w = top_w / top_w.sum(-1, keepdim=True)          # renormalise the chosen k
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):            # sparse: only the rows routed to e
            rows, slots = torch.nonzero(top_i == e, as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * top_w[rows, slots, None])
        # Switch/Mixtral load balancing: E * sum_e (share of assignments to e) * (mean prob of e);
        # it is 1 when both are uniform and grows when the router favours some experts.
        load = F.one_hot(top_i, self.e).float().sum((0, 1)) / top_i.numel()   # [E]
        aux = self.e * (load * probs.mean(0)).sum()
        return out.view(shape), aux, load.detach()


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.block_sparse_moe = SparseMoE(cfg)

    def forward(self, h: torch.Tensor, need_weights: bool = False):
        a, attn = self.self_attn(self.input_layernorm(h), need_weights)
        h = h + a
        m, aux, load = self.block_sparse_moe(self.post_attention_layernorm(h))
        return h + m, aux, load, attn


class Inner(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class MixtralLM(nn.Module):
    """state_dict() keys == core.model.weight_shapes(cfg) keys."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Small normal init (GPT-2 style), residual-output projections scaled down by depth.
        depth_scale = 1.0 / math.sqrt(2 * self.cfg.num_hidden_layers)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith(("o_proj.weight", "w2.weight")):
                nn.init.normal_(p, std=0.02 * depth_scale)
            else:
                nn.init.normal_(p, std=0.02)

    def head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, ids: torch.Tensor, need_weights: bool = False):
        """ids [B, T] -> logits [B, T, V], mean aux loss, per-layer load [L, E], per-layer attn (or None)."""
        h = self.model.embed_tokens(ids)
        auxes, loads, attns = [], [], []
        for layer in self.model.layers:
            h, aux, load, attn = layer(h, need_weights)
            auxes.append(aux)
            loads.append(load)
            attns.append(attn)
        logits = F.linear(self.model.norm(h), self.head_weight())
        return logits, torch.stack(auxes).mean(), torch.stack(loads), attns

    # ------------------------------------------------------------ weights in and out

    def numpy_weights(self) -> dict[str, np.ndarray]:
        """The weights under core's names as float32 arrays (what write_bundle takes)."""
        state = {k: v.detach().cpu().float().numpy().copy() for k, v in self.state_dict().items()}
        expected = weight_shapes(self.cfg)
        assert set(state) == set(expected), set(state) ^ set(expected)
        return state

    def load_numpy_weights(self, weights) -> None:
        self.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in weights.items()})
