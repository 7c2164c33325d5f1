"""Build model.onnx from weights with onnx.helper: the same math as core.model, as a graph.

Weights are initializers under their Hugging Face names; every Trace field is a named
output with a leading batch axis of 1. Two inputs have defaults (initializers that are
also graph inputs), so a caller may leave them out (a dense model's expert_override has K = 0):
  head_mask        float32 [L, H]     1 keeps a head, 0 removes its contribution
  expert_override  int64   [L, P, K]  -1 lets the router choose, e >= 0 forces expert e
                                      (P = max_position_embeddings; the graph reads the first T rows)
  logits_from      int64   []         logits are computed for positions logits_from..T-1 only (default 0):
                                      T x V floats are the largest output of a big-vocabulary model
and the other interventions of core.interventions, each defaulting to "none" (a patch's
defaults have a position axis of 1, which broadcasts over the T positions):
  ablate_mean      float32 []         1: an ablated head outputs its mean over positions instead of 0
  experts_off      bool    [L, E]     the router picks its top k among the experts left on
  resid_patch      float32 [S, T, D]  with resid_patch_mask  bool [S, T]      (S = 1 + 2L stages)
  head_patch       float32 [L, H, T, Dh] with head_patch_mask bool [L, H, T]
  expert_patch     float32 [L, E, T, D]  with expert_patch_mask bool [L, E, T]
"""
from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import BinaryIO, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from core.attention_summary import SUMMARY_FIELDS, THUMB_CELLS
from core.config import ModelConfig
from core.interventions import PATCHES
from core.model import rope_inv_freq, weight_shapes
from core.trace import LAYER_FIELDS, MODEL_FIELDS

OPSET = 17
IR_VERSION = 9  # the newest IR that onnxruntime releases of the last years all read
CONFIG_KEY = "glassbox.config"
_FLOAT_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64}


class _Graph:
    """A tiny builder: each op() call appends a node and returns its fresh output name.

    batched: activations carry a leading batch axis ([N, T, D], [N, H, T, Dh]) and the patch masks
    one too ([N, S, T] ...): the sweep graph (build_sweep_model) runs N interventions at once.
    """

    def __init__(self, batched: bool = False, prefix: str = "") -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.batched = batched
        self.prefix = prefix   # for nodes added to a graph built before, whose names they must not take
        self._count = 0

    def op(self, op_type: str, *inputs: str, outputs: int = 1, name: str | None = None, **attrs):
        self._count += 1
        stem = f"{self.prefix}{op_type.lower()}_{self._count}"
        outs = [name or stem] if outputs == 1 else [f"{stem}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        self._count += 1
        name = name or f"{self.prefix}const_{self._count}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def i64(self, *values: int) -> str:
        return self.const(np.array(values, np.int64))

    def f32(self, value: float) -> str:
        return self.const(np.array(value, np.float32))

    def lead(self, *dims: int) -> str:  # a Reshape shape, the batch axis (if any) kept as it is (0)
        return self.i64(*((0,) if self.batched else ()), *dims)

    def perm(self, *axes: int) -> list[int]:  # a Transpose of the per-run axes, the batch axis staying first
        return [0, *(a + 1 for a in axes)] if self.batched else list(axes)

    # ------------------------------------------------ the primitives of core.model, as ops
    def linear(self, x: str, w: str, bias: str | None = None) -> str:  # [(N,) T, in] x [out, in] -> [(N,) T, out]
        if not self.batched:
            return self.op("Gemm", x, w, *([bias] if bias else []), transB=1)
        # Gemm is 2-D: the batch's rows one after another, then apart again (a reshape copies nothing)
        out = self.op("Gemm", self.op("Flatten", x, axis=-1), w, *([bias] if bias else []), transB=1)
        shape = self.op("Concat", self.op("Shape", x, end=-1), self.op("Shape", out, start=-1), axis=0)
        return self.op("Reshape", out, shape)

    def project(self, x: str, name: str, bias: bool) -> str:  # [T, in] -> [T, out], core.model.project
        return self.linear(x, f"{name}.weight", f"{name}.bias" if bias else None)

    def rms_norm(self, x: str, w: str, eps: float) -> str:
        variance = self.op("ReduceMean", self.op("Mul", x, x), axes=[-1], keepdims=1)
        normed = self.op("Div", x, self.op("Sqrt", self.op("Add", variance, self.f32(eps))))
        return self.op("Mul", normed, w)

    def split_heads(self, x: str, n_heads: int, head_dim: int) -> str:  # [T, n*Dh] -> [n, T, Dh]
        return self.op("Transpose", self.op("Reshape", x, self.lead(0, n_heads, head_dim)), perm=self.perm(1, 0, 2))

    def merge_heads(self, x: str, width: int) -> str:  # [H, T, Dh] -> [T, H*Dh]
        return self.op("Reshape", self.op("Transpose", x, perm=self.perm(1, 0, 2)), self.lead(0, width))

    def repeat_kv(self, x: str, n_rep: int, n_heads: int, head_dim: int) -> str:  # [Hkv, T, Dh] -> [H, T, Dh]
        if n_rep == 1:
            return x
        tiled = self.op("Expand", self.op("Unsqueeze", x, self.i64(-3)), self.i64(1, n_rep, 1, 1))
        return self.op("Reshape", tiled, self.lead(n_heads, -1, head_dim))

    def rope(self, x: str, cos: str, sin: str, head_dim: int) -> str:  # [H, T, Dh] -> [H, T, Dh]
        half = head_dim // 2
        x1, x2 = self.op("Split", x, self.i64(half, half), outputs=2, axis=-1)
        rotated = self.op("Concat", self.op("Neg", x2), x1, axis=-1)
        return self.op("Add", self.op("Mul", x, cos), self.op("Mul", rotated, sin))

    def silu(self, x: str) -> str:
        return self.op("Mul", x, self.op("Sigmoid", x))


class ExternalWeights:
    """Writes weights to a side file (ONNX external data) one at a time, so no 2 GB protobuf is built.

    Each tensor starts on a page boundary: onnxruntime and numpy can then map it instead of reading it.
    """
    ALIGN = 4096

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: BinaryIO = self.path.open("wb")

    def tensor(self, name: str, array: np.ndarray) -> onnx.TensorProto:
        data = np.ascontiguousarray(np.asarray(array, np.float32))  # one tensor converted at a time
        offset = -(-self._file.tell() // self.ALIGN) * self.ALIGN
        self._file.seek(offset)
        self._file.write(data.tobytes())
        proto = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(data.shape),
                                 data_location=TensorProto.EXTERNAL)
        for key, value in (("location", self.path.name), ("offset", str(offset)), ("length", str(data.nbytes))):
            proto.external_data.add(key=key, value=value)
        return proto

    def close(self) -> None:
        self._file.close()


def build_model(config: ModelConfig, weights: Mapping[str, np.ndarray],
                external_data: str | os.PathLike | None = None) -> onnx.ModelProto:
    """The whole forward pass of core.model.forward as an ONNX graph exposing every Trace field.

    With external_data (a file path beside the future model.onnx) the weights are written there.
    """
    cfg = config
    check_weights(cfg, weights)
    g = _Graph()
    side = ExternalWeights(Path(external_data)) if external_data is not None else None
    for name in weight_shapes(cfg):
        if side is None:
            g.const(np.asarray(weights[name], np.float32), name)
        else:
            g.initializers.append(side.tensor(name, weights[name]))
    if side is not None:
        side.close()
    L, H, K = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_experts_per_tok
    g.const(np.ones((L, H), np.float32), "head_mask")
    g.const(np.full((L, cfg.max_position_embeddings, K), -1, np.int64), "expert_override")
    g.const(np.array(0, np.int64), "logits_from")
    intervention_inputs = _intervention_defaults(g, cfg)
    outputs: list[tuple[str, str, type, list]] = []  # (graph value, output name, dtype, dims)

    def emit(value: str, out_name: str, dtype: type, dims: list) -> None:
        g.op("Unsqueeze", value, g.i64(0), name=out_name)
        outputs.append((out_name, out_name, dtype, [1] + dims))

    final_norm, n_tokens = _forward(g, cfg, emit)
    emit(final_norm, "final_norm", np.float32, ["T", cfg.hidden_size])
    rows = g.op("Slice", final_norm, g.op("Unsqueeze", "logits_from", g.i64(0)), n_tokens, g.i64(0))
    emit(_lm_head(g, cfg, rows), "logits", np.float32, ["R", cfg.vocab_size])

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"]),
        helper.make_tensor_value_info("head_mask", TensorProto.FLOAT, [L, H]),
        helper.make_tensor_value_info("expert_override", TensorProto.INT64, [L, cfg.max_position_embeddings, K]),
        helper.make_tensor_value_info("logits_from", TensorProto.INT64, []),
        *intervention_inputs,
    ]
    graph_outputs = [helper.make_tensor_value_info(n, _FLOAT_TYPES[t], d) for _, n, t, d in outputs]
    return _model(cfg, helper.make_graph(g.nodes, "glassbox_mixtral", inputs, graph_outputs, g.initializers))


SWEEP_OUTPUT = "last_logits"


def build_sweep_model(config: ModelConfig, model_bytes: bytes) -> bytes:
    """The graph a patching sweep runs: N interventions of one sentence in one call.

    The same forward pass as build_model (one builder), with a batch axis on the activations and on
    the three patch masks (resid_patch_mask [N, S, T], head_patch_mask [N, L, H, T], expert_patch_mask
    [N, L, E, T]); the patch values, head mask, ablate_mean, experts_off and expert_override are shared
    by the batch, and input_ids [1, T] are the one sentence. Its one output is last_logits [N, V]: a
    sweep reads the last position only. The weights are the bundle graph's own initializers (mapped
    external data stays where it is).
    """
    cfg = config
    bundle_model = onnx.load_from_string(model_bytes)
    shapes = weight_shapes(cfg)
    g = _Graph(batched=True)
    g.initializers.extend(t for t in bundle_model.graph.initializer if t.name in shapes)
    L, H, K = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_experts_per_tok
    g.const(np.ones((L, H), np.float32), "head_mask")
    g.const(np.full((L, cfg.max_position_embeddings, K), -1, np.int64), "expert_override")
    intervention_inputs = _intervention_defaults(g, cfg, batched=True)
    final_norm, n_tokens = _forward(g, cfg, lambda *_: None)
    last = g.op("Gather", final_norm, g.op("Sub", g.op("Squeeze", n_tokens, g.i64(0)), g.const(np.array(1, np.int64))),
                axis=-2)                                                   # [N, D]
    g.op("Identity", _lm_head(g, cfg, last), name=SWEEP_OUTPUT)         # [N, V]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"]),
        helper.make_tensor_value_info("head_mask", TensorProto.FLOAT, [L, H]),
        helper.make_tensor_value_info("expert_override", TensorProto.INT64, [L, cfg.max_position_embeddings, K]),
        *intervention_inputs,
    ]
    output = helper.make_tensor_value_info(SWEEP_OUTPUT, TensorProto.FLOAT, ["N", cfg.vocab_size])
    model = _model(cfg, helper.make_graph(g.nodes, "glassbox_sweep", inputs, [output], g.initializers))
    return prune_outputs(model.SerializeToString(), [SWEEP_OUTPUT])  # the per-layer fields nobody reads


def _model(cfg: ModelConfig, graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="glassbox", ir_version=IR_VERSION)
    helper.set_model_props(model, {CONFIG_KEY: json.dumps(cfg.to_dict(), sort_keys=True)})
    return model


def _lm_head(g: _Graph, cfg: ModelConfig, rows: str) -> str:  # [R, D] -> [R, V]
    # logits = rows @ head.T computed as (head @ rows.T).T: onnxruntime packs a constant *second* operand
    # into a copy at load, and the [V, D] head (the embedding itself when tied) is the largest weight.
    head = "lm_head.weight" if not cfg.tie_word_embeddings else "model.embed_tokens.weight"
    by_vocab = g.op("MatMul", head, g.op("Transpose", rows, perm=[1, 0]))                 # [V, R]
    return g.op("Transpose", by_vocab, perm=[1, 0])


def _forward(g: _Graph, cfg: ModelConfig, emit) -> tuple[str, str]:
    """The layers of core.model.forward from input_ids to the final norm; emit(value, name, dtype, dims) is
    called with every Trace field. Returns the final norm's value [(N,) T, D] and T (a [1] shape)."""
    L, H, Hkv, Dh = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    ids = g.op("Squeeze", "input_ids", g.i64(0))                       # [T]
    n_tokens = g.op("Shape", ids)                                        # [1] = T
    positions = g.op("Range", g.const(np.array(0, np.int64)), g.op("Squeeze", n_tokens, g.i64(0)),
                     g.const(np.array(1, np.int64)))                     # [T]
    # causal mask: key j lies in the future of query i when j > i
    future = g.op("Greater", g.op("Unsqueeze", positions, g.i64(0)), g.op("Unsqueeze", positions, g.i64(1)))
    if cfg.sliding_window:  # Mistral: keys at or past `window` positions back are hidden too
        gap = g.op("Sub", g.op("Unsqueeze", positions, g.i64(1)), g.op("Unsqueeze", positions, g.i64(0)))
        future = g.op("Or", future, g.op("GreaterOrEqual", gap, g.i64(cfg.sliding_window)))
    # RoPE tables, shared by all layers: angle m * theta_i, duplicated for the rotate-half layout
    angles = g.op("Mul", g.op("Unsqueeze", g.op("Cast", positions, to=TensorProto.FLOAT), g.i64(1)),
                  g.const(rope_inv_freq(Dh, cfg.rope_theta, cfg.rope_scaling)[None, :]))
    angles = g.op("Concat", angles, angles, axis=-1)                     # [T, Dh]
    cos, sin = g.op("Cos", angles), g.op("Sin", angles)
    scale = g.f32(np.sqrt(Dh))
    minus_inf = g.f32(-np.inf)

    h = g.op("Gather", "model.embed_tokens.weight", ids, axis=0)       # [T, D]
    if g.batched:  # [1, T, D]: the batch axis grows to N at the first patch (broadcasting)
        h = g.op("Unsqueeze", h, g.i64(0))
    h = _patch_rows(g, h, "resid_patch", 0)
    emit(h, "embed", np.float32, ["T", cfg.hidden_size])
    dims = _layer_dims(cfg)
    for l in range(L):
        p = f"model.layers.{l}"
        parts: dict[str, str] = {}
        # pre-norm attention
        x = parts["attn_in"] = g.rms_norm(h, f"{p}.input_layernorm.weight", cfg.rms_norm_eps)
        q = g.split_heads(g.project(x, f"{p}.self_attn.q_proj", cfg.qkv_bias), H, Dh)
        k = g.split_heads(g.project(x, f"{p}.self_attn.k_proj", cfg.qkv_bias), Hkv, Dh)
        v = g.split_heads(g.project(x, f"{p}.self_attn.v_proj", cfg.qkv_bias), Hkv, Dh)
        if cfg.qk_norm:  # Qwen3: per-head RMSNorm of q and k
            q = g.rms_norm(q, f"{p}.self_attn.q_norm.weight", cfg.rms_norm_eps)
            k = g.rms_norm(k, f"{p}.self_attn.k_norm.weight", cfg.rms_norm_eps)
        parts["q"] = q
        k = parts["k"] = g.repeat_kv(k, H // Hkv, H, Dh)
        v = parts["v"] = g.repeat_kv(v, H // Hkv, H, Dh)
        q_rot = parts["q_rot"] = g.rope(q, cos, sin, Dh)
        k_rot = parts["k_rot"] = g.rope(k, cos, sin, Dh)
        raw = g.op("Div", g.op("MatMul", q_rot, g.op("Transpose", k_rot, perm=g.perm(0, 2, 1))), scale)
        scores = parts["scores"] = g.op("Where", future, minus_inf, raw)
        attn = parts["attn"] = g.op("Softmax", scores, axis=-1)
        mask_l = g.op("Reshape", g.op("Gather", "head_mask", g.i64(l), axis=0), g.i64(H, 1, 1))
        head_out = _ablate_heads(g, g.op("MatMul", attn, v), mask_l)
        head_out = parts["head_out"] = _patch_rows(g, head_out, "head_patch", l)
        attn_out = parts["attn_out"] = g.project(g.merge_heads(head_out, H * Dh), f"{p}.self_attn.o_proj", cfg.o_bias)
        resid_mid = parts["resid_mid"] = _patch_rows(g, g.op("Add", h, attn_out), "resid_patch", 1 + 2 * l)
        # pre-norm mixture of experts (or dense MLP)
        x = parts["moe_in"] = g.rms_norm(resid_mid, f"{p}.post_attention_layernorm.weight", cfg.rms_norm_eps)
        parts.update(_dense_mlp(g, x, f"{p}.mlp") if not cfg.is_moe else _moe(g, cfg, x, l, n_tokens, minus_inf))
        h = parts["resid_post"] = _patch_rows(g, g.op("Add", resid_mid, parts["moe_out"]), "resid_patch", 2 + 2 * l)
        for name, _, dtype in LAYER_FIELDS:
            emit(parts[name], f"layers.{l}.{name}", dtype, dims[name])
    return g.rms_norm(h, "model.norm.weight", cfg.rms_norm_eps), n_tokens


def _moe(g: _Graph, cfg: ModelConfig, x: str, l: int, n_tokens: str, minus_inf: str) -> dict[str, str]:
    """core.model.moe: [T, D] -> the router's parts and moe_out [T, D]."""
    p, K = f"model.layers.{l}.block_sparse_moe", cfg.num_experts_per_tok
    parts: dict[str, str] = {}
    logits = parts["router_logits"] = g.linear(x, f"{p}.gate.weight")
    probs = parts["router_probs"] = g.op("Softmax", logits, axis=-1)
    layer_index = g.const(np.array(l, np.int64))  # a scalar index drops the layer axis
    ranked = g.op("Where", g.op("Gather", "experts_off", layer_index, axis=0), minus_inf, logits)
    _, top_ids = g.op("TopK", ranked, g.i64(K), outputs=2, axis=-1, largest=1, sorted=1)
    forced = g.op("Slice", g.op("Gather", "expert_override", layer_index, axis=0), g.i64(0), n_tokens, g.i64(0))
    ids_l = parts["expert_ids"] = g.op("Where", g.op("GreaterOrEqual", forced, g.i64(0)), forced, top_ids)
    chosen = g.op("GatherElements", probs, ids_l, axis=-1)
    weights_l = parts["expert_weights"] = g.op("Div", chosen, g.op("ReduceSum", chosen, g.i64(-1), keepdims=1))
    # dense combine: a [T, E] matrix holding each token's weight for each expert (0 if not chosen)
    zeros = g.op("ConstantOfShape", g.op("Shape", probs), value=numpy_helper.from_array(np.zeros(1, np.float32)))
    combine = g.op("ScatterElements", zeros, ids_l, weights_l, axis=-1, reduction="add")
    expert_terms = []
    for e in range(cfg.num_local_experts):
        q_e = f"{p}.experts.{e}"
        hidden = g.op("Mul", g.silu(g.linear(x, f"{q_e}.w1.weight")), g.linear(x, f"{q_e}.w3.weight"))
        column = g.op("Slice", combine, g.i64(e), g.i64(e + 1), g.i64(-1))
        term = g.op("Mul", g.linear(hidden, f"{q_e}.w2.weight"), column)
        expert_terms.append(_patch_rows(g, term, "expert_patch", l, e))
    parts["moe_out"] = g.op("Sum", *expert_terms) if len(expert_terms) > 1 else expert_terms[0]
    return parts


def _dense_mlp(g: _Graph, x: str, p: str) -> dict[str, str]:  # [T, D] -> parts of core.model.dense_mlp
    hidden = g.op("Mul", g.silu(g.linear(x, f"{p}.gate_proj.weight")), g.linear(x, f"{p}.up_proj.weight"))
    empty = g.op("Slice", x, g.i64(0), g.i64(0), g.i64(-1))  # [T, 0]: a dense model has no router
    empty_ids = g.op("Cast", empty, to=TensorProto.INT64)
    return dict(router_logits=empty, router_probs=g.op("Identity", empty), expert_ids=empty_ids,
                expert_weights=g.op("Identity", empty), moe_out=g.linear(hidden, f"{p}.down_proj.weight"))


# ---------------------------------------------------------------- interventions (core.interventions)

def _intervention_defaults(g: _Graph, cfg: ModelConfig, batched: bool = False) -> list[onnx.ValueInfoProto]:
    """Register each intervention input's "none" default; return the inputs' declarations.

    batched (the sweep graph): each patch mask has a leading batch axis, N when fed and 1 by default."""
    L, H, E, D, Dh = (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts,
                      cfg.hidden_size, cfg.head_dim)
    S = 1 + 2 * L
    lead, lead_dims = ((1,), ["N"]) if batched else ((), [])
    declared = {  # name: (default, declared dims); a patch's position axis is 1 by default and T when fed
        "ablate_mean": (np.array(0, np.float32), []),
        "experts_off": (np.zeros((L, E), bool), [L, E]),
        "resid_patch": (np.zeros((S, 1, D), np.float32), [S, "T_patch", D]),
        "resid_patch_mask": (np.zeros((*lead, S, 1), bool), [*lead_dims, S, "T_patch"]),
        "head_patch": (np.zeros((L, H, 1, Dh), np.float32), [L, H, "T_patch", Dh]),
        "head_patch_mask": (np.zeros((*lead, L, H, 1), bool), [*lead_dims, L, H, "T_patch"]),
        "expert_patch": (np.zeros((L, E, 1, D), np.float32), [L, E, "T_patch", D]),
        "expert_patch_mask": (np.zeros((*lead, L, E, 1), bool), [*lead_dims, L, E, "T_patch"]),
    }
    kinds = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(bool): TensorProto.BOOL}
    for name, (default, _) in declared.items():
        g.const(default, name)
    return [helper.make_tensor_value_info(name, kinds[default.dtype], dims)
            for name, (default, dims) in declared.items()]


def _patch_rows(g: _Graph, x: str, patch: str, *index: int) -> str:  # [..., T, W] -> [..., T, W]
    """x with the rows where patch_mask[index] is True replaced by patch[index] (core.model.patched)."""
    values, mask = patch, f"{patch}_mask"
    mask_axis = 1 if g.batched else 0  # a batched mask keeps its batch axis in front
    for i in index:  # scalar indices drop the leading axes: [S, T, D] -> [T, D]
        values = g.op("Gather", values, g.const(np.array(i, np.int64)), axis=0)
        mask = g.op("Gather", mask, g.const(np.array(i, np.int64)), axis=mask_axis)
    return g.op("Where", g.op("Unsqueeze", mask, g.i64(-1)), values, x)


def _ablate_heads(g: _Graph, head_out: str, mask: str) -> str:  # [H, T, Dh], [H, 1, 1] -> [H, T, Dh]
    """core.model.ablate_heads: scale by the mask, plus (1 - mask) x the mean over positions when ablate_mean is 1."""
    mean = g.op("ReduceMean", head_out, axes=[-2], keepdims=1)  # over the positions
    fill = g.op("Mul", g.op("Mul", g.op("Sub", g.f32(1.0), mask), mean), "ablate_mean")
    return g.op("Add", g.op("Mul", head_out, mask), fill)


def _layer_dims(cfg: ModelConfig) -> dict[str, list]:
    sym = dict(T="T", D=cfg.hidden_size, H=cfg.num_attention_heads, Dh=cfg.head_dim,
               E=cfg.num_local_experts, K=cfg.num_experts_per_tok, V=cfg.vocab_size)
    return {name: [sym[s] for s in spec.split()] for name, spec, _ in LAYER_FIELDS + MODEL_FIELDS}


def check_weights(config: ModelConfig, weights: Mapping[str, np.ndarray]) -> None:
    """Raise ValueError naming the first parameter that is missing or has the wrong shape."""
    for name, shape in weight_shapes(config).items():
        if name not in weights:
            raise ValueError(f"weights: {name} is missing")
        if tuple(np.shape(weights[name])) != shape:
            raise ValueError(f"weights: {name} has shape {tuple(np.shape(weights[name]))}, config says {shape}")


def read_weights(model: onnx.ModelProto, config: ModelConfig,
                 folder: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """The parameters stored in a model.onnx, as float32 arrays under their HF names.

    Weights kept as external data in `folder` are memory-mapped read-only, not copied.
    """
    wanted = weight_shapes(config)
    found = {t.name: t for t in model.graph.initializer if t.name in wanted}
    files: dict[str, np.memmap] = {}  # one read-only mapping per data file, shared by its tensors
    weights = {name: _mapped(t, Path(folder), files) if folder is not None and uses_external_data(t)
               else numpy_helper.to_array(t).astype(np.float32, copy=False) for name, t in found.items()}
    check_weights(config, weights)
    return weights


def release_pages(weights: Mapping[str, np.ndarray]) -> None:
    """Let the kernel drop the pages of mapped weights that checks have read (they count as this process's
    memory until then): a 0.5B model's 2 GB would otherwise sit beside onnxruntime's own copy. A later
    read maps them again from the page cache; arrays held in memory are untouched."""
    for mapping in {id(w._mmap): w._mmap for w in weights.values() if getattr(w, "_mmap", None) is not None}.values():
        mapping.madvise(mmap.MADV_DONTNEED)


def with_attention_summaries(model_bytes: bytes, num_layers: int) -> bytes:
    """The bundle's graph plus each layer's attention summaries as outputs (layers.{l}.attn_thumb [1, H, P, P],
    layers.{l}.attn_top [1, H]; core.attention_summary has their rules): a partial run that asks for them
    and not for attn keeps no [H, T, T]. Built at load from any bundle's graph, old exports included."""
    model = onnx.load_from_string(model_bytes)
    g = _Graph(prefix="summary_")
    outputs, follow = [], {}
    for l in range(num_layers):
        start = len(g.nodes)
        attn = g.op("Squeeze", f"layers.{l}.attn", g.i64(0))   # [H, T, T]
        for name, value in _summary_ops(g, attn).items():
            g.op("Unsqueeze", value, g.i64(0), name=f"layers.{l}.{name}")
            dims = [1, "H"] + ([f"P{l}", f"P{l}"] if name == "attn_thumb" else [])
            outputs.append(helper.make_tensor_value_info(f"layers.{l}.{name}", TensorProto.FLOAT, dims))
        follow[f"layers.{l}.attn"] = g.nodes[start:]
    _insert_after(model.graph, follow)
    model.graph.initializer.extend(g.initializers)
    model.graph.output.extend(outputs)
    return model.SerializeToString()


def _insert_after(graph: onnx.GraphProto, follow: dict[str, list[onnx.NodeProto]]) -> None:
    """Put each list of new nodes right after the node making the value it is keyed by: with its
    priority-based order (core.runners.session_options) onnxruntime runs nodes in the graph's order where
    it may, and nodes appended at the end would keep every layer's value alive until then."""
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for out in node.output:
            nodes.extend(follow.get(out, ()))
    del graph.node[:]
    graph.node.extend(nodes)


def _summary_ops(g: _Graph, attn: str) -> dict[str, str]:  # [H, T, T] -> {attn_thumb [H, P, P], attn_top [H]}
    n = g.op("Shape", attn, start=2)                                     # [1] = T
    cells = g.i64(THUMB_CELLS)
    stride = g.op("Div", g.op("Add", n, g.i64(THUMB_CELLS - 1)), cells)  # s = ceil(T / THUMB_CELLS)
    size = g.op("Div", g.op("Sub", g.op("Add", n, stride), g.i64(1)), stride)   # P = ceil(T / s)
    pad = g.op("Sub", g.op("Mul", size, stride), n)
    pads = g.op("Concat", g.i64(0, 0, 0, 0), pad, pad, axis=0)         # after the last query and key
    padded = g.op("Pad", attn, pads)
    blocks = g.op("Reshape", padded, g.op("Concat", g.i64(0), size, stride, size, stride, axis=0))
    thumb = g.op("ReduceMax", blocks, axes=[2, 4], keepdims=0)
    later = g.op("Cast", g.op("Greater", g.op("Range", g.const(np.array(0, np.int64)), g.op("Squeeze", n, g.i64(0)),
                                               g.const(np.array(1, np.int64))), g.const(np.array(0, np.int64))),
                 to=TensorProto.FLOAT)                                   # [T]: 0 for query 0, 1 after
    top = g.op("ReduceMax", g.op("Mul", attn, g.op("Unsqueeze", later, g.i64(1))), axes=[1, 2], keepdims=0)
    return {"attn_thumb": thumb, "attn_top": top}


GATES_INPUT = "output_gates"   # int64 [L, F]: 1 lets layers.{l}.{GATED_FIELDS[f]} out of a run, 0 leaves it empty
GATED_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in LAYER_FIELDS + SUMMARY_FIELDS)


def gated_outputs(model_bytes: bytes, num_layers: int) -> bytes:
    """The graph with every per-layer output behind a gate: layers.{l}.{field} is [0, ...] (nothing) in a
    run whose GATES_INPUT is 0 there, so one session serves every request (the layer a panel selects
    changes a feed, not the session) and onnxruntime holds none of the [H, T, T] nobody asked for. The
    gates default to 1: a caller that does not feed them gets every output."""
    model = onnx.load_from_string(model_bytes)
    present = {o.name for o in model.graph.output}
    g = _Graph(prefix="gate_")
    renamed, follow = {}, {}
    flat = g.op("Reshape", GATES_INPUT, g.i64(-1))
    first = list(g.nodes)
    for l in range(num_layers):
        for f, field in enumerate(GATED_FIELDS):
            name = f"layers.{l}.{field}"
            if name in present:
                start = len(g.nodes)
                renamed[name] = f"{name}.ungated"
                count = g.op("Reshape", g.op("Gather", flat, g.i64(l * len(GATED_FIELDS) + f)), g.i64(1))
                g.op("Slice", renamed[name], g.i64(0), count, g.i64(0), name=name)   # the leading batch axis: 1 or 0
                follow[renamed[name]] = g.nodes[start:]
    for node in model.graph.node:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        node.output[:] = [renamed.get(o, o) for o in node.output]
    _insert_after(model.graph, follow)
    model.graph.node.insert(0, first[0])
    model.graph.initializer.extend(g.initializers)
    model.graph.initializer.append(numpy_helper.from_array(np.ones((num_layers, len(GATED_FIELDS)), np.int64),
                                                           GATES_INPUT))
    model.graph.input.append(helper.make_tensor_value_info(GATES_INPUT, TensorProto.INT64,
                                                           [num_layers, len(GATED_FIELDS)]))
    for output in model.graph.output:   # an output that is empty when gated: its batch axis is 1 or 0
        if output.name in renamed:
            output.type.tensor_type.shape.dim[0].dim_param = "gate"
    return model.SerializeToString()


def patches_as_plain_inputs(model_bytes: bytes, base_dir: str = "") -> tuple[bytes, dict[str, np.ndarray]]:
    """The graph without the patch inputs' defaults (initializers that are also inputs), and those defaults,
    each input's position axis its own: with its priority-based order onnxruntime reuses buffers between
    values it takes to share a shape, and a patch of T positions fed beside another's default of 1 failed
    its buffer check. A caller feeds the defaults where there is no patch. base_dir: the bundle folder, where
    a default kept as external data is read from."""
    model = onnx.load_from_string(model_bytes)
    names = {name for pair in PATCHES for name in pair}
    defaults = {t.name: numpy_helper.to_array(t, base_dir) for t in model.graph.initializer if t.name in names}
    kept = [t for t in model.graph.initializer if t.name not in names]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    for declared in model.graph.input:   # one patch's positions need not be another's (a default has 1)
        if declared.name in names:
            for dim in declared.type.tensor_type.shape.dim:
                if dim.dim_param:
                    dim.dim_param = f"{declared.name}.{dim.dim_param}"
    return model.SerializeToString(), defaults


def output_gates(num_layers: int, names) -> np.ndarray:  # -> [L, F] int64, GATES_INPUT for these output names
    gates = np.zeros((num_layers, len(GATED_FIELDS)), np.int64)
    index = {f"layers.{l}.{field}": (l, f) for l in range(num_layers) for f, field in enumerate(GATED_FIELDS)}
    for name in names:
        if name in index:
            gates[index[name]] = 1
    return gates


def prune_outputs(model_bytes: bytes, keep: list[str]) -> bytes:
    """The same graph with only the outputs in `keep`; the nodes that only fed the others are dropped."""
    model = onnx.load_from_string(model_bytes)
    wanted = set(keep)
    outputs = [o for o in model.graph.output if o.name in wanted]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    needed = set(wanted)
    kept_nodes = []
    for node in reversed(model.graph.node):  # nodes are in topological order: walk back from the outputs
        if any(name in needed for name in node.output):
            kept_nodes.append(node)
            needed.update(node.input)
    del model.graph.node[:]
    model.graph.node.extend(reversed(kept_nodes))
    return model.SerializeToString()


def _mapped(tensor: onnx.TensorProto, folder: Path, files: dict[str, np.memmap]) -> np.ndarray:
    info = ExternalDataInfo(tensor)
    if tensor.data_type != TensorProto.FLOAT:
        raise ValueError(f"weights: {tensor.name} is stored as external data of a type other than float32")
    shape = tuple(tensor.dims)
    nbytes = 4 * int(np.prod(shape, dtype=np.int64))
    if info.length not in (None, nbytes):
        raise ValueError(f"weights: {tensor.name} claims {info.length} bytes for shape {shape}")
    if info.location not in files:
        files[info.location] = np.memmap(folder / info.location, dtype=np.uint8, mode="r")
    start = info.offset or 0
    raw = files[info.location][start:start + nbytes]
    if raw.size != nbytes:
        raise ValueError(f"weights: {tensor.name} lies past the end of {info.location}")
    return raw.view(np.float32).reshape(shape)


__all__ = ["build_model", "build_sweep_model", "read_weights", "check_weights", "CONFIG_KEY", "OPSET"]
