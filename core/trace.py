"""Trace: everything one forward pass computed, as immutable NumPy arrays.

Both runners fill the same fields; every panel reads only a Trace (and the selection).
Per layer, H heads, T tokens, Dh head size, E experts, k experts per token:
k and v are given per *query* head (grouped-query heads already repeated, as the
attention uses them), so ``k[h]`` is the key matrix query head ``h`` attends with.

Dense models (Llama, Mistral, Qwen: one SwiGLU MLP, no router) keep every field: E = k = 0,
so router_logits, router_probs, expert_ids, expert_weights are empty [T, 0] arrays and
expert_override is [L, T, 0]; moe_in / moe_out are the MLP's input and output. ``q`` and ``k``
are after the per-head q/k RMSNorm where the model has one (Qwen3), before RoPE.

A partial trace (``Runner.run(ids, fields=...)``, for models too large to keep everything) holds
only the requested outputs; the others are None and ``fields`` names what is there. The name
"logits.last" asks for the last position's logits alone: ``logits`` is then [1, V] and
``logits_from`` is T - 1 (row r of ``logits`` is position logits_from + r); "logits.from.N" asks for
positions N..T-1. A partial run may also ask for the attention grid's summaries of a layer
(core.attention_summary: ``attn_thumb``, ``attn_top``) instead of its [H, T, T] ``attn``; a full trace
has none (they are computed from ``attn``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from core.attention_summary import SUMMARY_FIELDS, thumb_size
from core.config import ModelConfig

# (field, shape in symbols, dtype) — the contract every runner meets, in ONNX output order.
LAYER_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("attn_in", "T D", np.float32),        # RMSNorm(h): what attention reads
    ("q", "H T Dh", np.float32),           # before RoPE
    ("k", "H T Dh", np.float32),
    ("v", "H T Dh", np.float32),
    ("q_rot", "H T Dh", np.float32),       # after RoPE
    ("k_rot", "H T Dh", np.float32),
    ("scores", "H T T", np.float32),       # q_rot·k_rot/sqrt(Dh), -inf above the diagonal
    ("attn", "H T T", np.float32),         # softmax of scores
    ("head_out", "H T Dh", np.float32),    # attn @ v, times the head mask
    ("attn_out", "T D", np.float32),       # o_proj of the concatenated heads
    ("resid_mid", "T D", np.float32),
    ("moe_in", "T D", np.float32),         # RMSNorm(resid_mid): what the router reads
    ("router_logits", "T E", np.float32),
    ("router_probs", "T E", np.float32),   # softmax over all experts
    ("expert_ids", "T K", np.int64),       # chosen experts, best first
    ("expert_weights", "T K", np.float32), # their probabilities renormalised to sum 1
    ("moe_out", "T D", np.float32),
    ("resid_post", "T D", np.float32),
)
MODEL_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("embed", "T D", np.float32),
    ("final_norm", "T D", np.float32),
    ("logits", "T V", np.float32),
)


class TraceError(ValueError):
    """A Trace whose arrays do not match the model's shapes."""


def _frozen(a: np.ndarray | None) -> np.ndarray | None:
    if a is None:  # a field a partial trace did not ask for
        return None
    a = np.asarray(a)
    if a.flags.writeable:
        a = a.copy()
        a.setflags(write=False)
    return a


LAST_LOGITS = "logits.last"
LOGITS_FROM = "logits.from."   # "logits.from.N": the logits of positions N..T-1 (core.trace_fields.logits_from)


def select_outputs(num_layers: int, fields) -> tuple[list[str], bool]:
    """Output names for a field request (names as in output_names, or a layer field for every layer,
    or "logits.last"); also whether only the last position's logits are wanted. ValueError if unknown."""
    every = output_names(num_layers) + summary_names(num_layers)
    per_layer = {name for name, _, _ in LAYER_FIELDS + SUMMARY_FIELDS}
    chosen: set[str] = set()
    last_only = rows_from = False
    for name in fields:
        if name == LAST_LOGITS:
            chosen.add("logits")
            last_only = True
        elif name.startswith(LOGITS_FROM) and name[len(LOGITS_FROM):].isdigit():
            chosen.add("logits")
            rows_from = True
        elif name in per_layer:
            chosen.update(f"layers.{l}.{name}" for l in range(num_layers))
        elif name in every:
            chosen.add(name)
        else:
            raise ValueError(f"unknown trace field {name!r}")
    last_only = last_only and "logits" not in fields and not rows_from
    return [n for n in every if n in chosen], last_only


def output_names(num_layers: int) -> list[str]:
    """The ONNX graph's output names, in order; trace.npz uses the same keys."""
    names = ["embed"]
    for l in range(num_layers):
        names += [f"layers.{l}.{name}" for name, _, _ in LAYER_FIELDS]
    return names + ["final_norm", "logits"]


def summary_names(num_layers: int) -> list[str]:
    """The attention summaries a partial run may ask for (not outputs of the bundle's graph, nor in trace.npz)."""
    return [f"layers.{l}.{name}" for l in range(num_layers) for name, _, _ in SUMMARY_FIELDS]


@dataclass(frozen=True)
class LayerTrace:
    attn_in: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_rot: np.ndarray
    k_rot: np.ndarray
    scores: np.ndarray
    attn: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    resid_mid: np.ndarray
    moe_in: np.ndarray
    router_logits: np.ndarray
    router_probs: np.ndarray
    expert_ids: np.ndarray
    expert_weights: np.ndarray
    moe_out: np.ndarray
    resid_post: np.ndarray
    attn_thumb: np.ndarray | None = None   # [H, P, P] core.attention_summary, in partial traces that asked
    attn_top: np.ndarray | None = None     # [H]

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))


@dataclass(frozen=True)
class Trace:
    config: ModelConfig
    input_ids: np.ndarray                 # [T] int64
    embed: np.ndarray                     # [T, D]
    layers: tuple[LayerTrace, ...]
    final_norm: np.ndarray                # [T, D]
    logits: np.ndarray                    # [T, V]
    head_mask: np.ndarray                 # [L, H] the intervention this run used
    expert_override: np.ndarray           # [L, T, K] int64, -1 where the router chose
    backend: str = "numpy"
    elapsed_s: float = 0.0
    tokens: tuple[str, ...] = ()          # display label per position (filled by the session)
    text: str = ""                        # the analysed text (after truncation)
    truncated_chars: int = 0              # how many characters past the context were not analysed
    tokenization: Any = field(default=None, repr=False, compare=False)  # core.tokenizer.Tokenization of `text`
    weights: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    # Readable label of every vocab id (filled by the session from the tokenizer), so panels can name
    # tokens that are not in the sentence, e.g. next-token candidates; empty -> "#id".
    vocab_labels: tuple[str, ...] = field(default=(), repr=False, compare=False)
    fields: frozenset[str] | None = None  # the outputs a partial trace holds (None: every field)
    logits_from: int = 0                  # the position of logits' first row (T - 1 for "logits.last")
    # Every intervention of the run (core.interventions.Interventions, filled); None for a trace built by hand.
    interventions: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("input_ids", "embed", "final_norm", "logits", "head_mask", "expert_override"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "vocab_labels", tuple(self.vocab_labels))
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    # ---------------------------------------------------------- shape facts
    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_heads(self) -> int:
        return self.config.num_attention_heads

    def label(self, position: int) -> str:
        return self.tokens[position] if position < len(self.tokens) else f"#{int(self.input_ids[position])}"

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(self.n_tokens)]

    def vocab_label(self, token_id: int) -> str:
        """Readable label of any vocab id, in or out of the sentence ("#id" if the session gave none)."""
        token_id = int(token_id)
        return self.vocab_labels[token_id] if 0 <= token_id < len(self.vocab_labels) else f"#{token_id}"

    def logits_at(self, position: int) -> np.ndarray:  # -> [V]
        """The logits at a position (negative: from the end), whichever rows this trace holds."""
        position = position % self.n_tokens
        if self.logits is None or position < self.logits_from:
            raise KeyError(f"this partial trace holds no logits at position {position}")
        return self.logits[position - self.logits_from]

    def next_token_probs(self, position: int = -1, temperature: float = 1.0) -> np.ndarray:  # -> [V]
        z = self.logits_at(position).astype(np.float64) / max(temperature, 1e-6)
        z = np.exp(z - z.max())
        return z / z.sum()

    def with_text(self, tokens: tuple[str, ...], text: str = "", truncated_chars: int = 0,
                  tokenization: Any = None) -> "Trace":
        return replace(self, tokens=tuple(tokens), text=text, truncated_chars=truncated_chars,
                       tokenization=tokenization)

    # ---------------------------------------------------------- validation
    def _symbols(self) -> dict[str, int]:
        c = self.config
        return dict(T=self.n_tokens, D=c.hidden_size, H=c.num_attention_heads, Dh=c.head_dim,
                    E=c.num_local_experts, K=c.num_experts_per_tok, V=c.vocab_size, P=thumb_size(self.n_tokens))

    def validate(self) -> "Trace":
        """Check every array's shape and dtype against the config; raise TraceError naming the first bad one."""
        sym = self._symbols()
        expect = lambda spec: tuple(sym[s] for s in spec.split())  # noqa: E731
        _check("input_ids", self.input_ids, (sym["T"],), np.int64)
        if len(self.layers) != self.config.num_hidden_layers:
            raise TraceError(f"trace has {len(self.layers)} layers, config says {self.config.num_hidden_layers}")
        for name, spec, dtype in MODEL_FIELDS:
            shape = expect(spec) if name != "logits" else (sym["T"] - self.logits_from, sym["V"])
            self._check_field(name, getattr(self, name), shape, dtype)
        for l, layer in enumerate(self.layers):
            for name, spec, dtype in LAYER_FIELDS:
                self._check_field(f"layers.{l}.{name}", getattr(layer, name), expect(spec), dtype)
            for name, spec, dtype in SUMMARY_FIELDS:
                if getattr(layer, name) is not None:
                    _check(f"layers.{l}.{name}", getattr(layer, name), expect(spec), dtype)
        for l, layer in enumerate(self.layers):  # panels index by expert id: one out of range would crash them
            ids = layer.expert_ids
            if ids is not None and ids.size and (ids.min() < 0 or ids.max() >= sym["E"]):
                raise TraceError(f"layers.{l}.expert_ids: values outside [0, {sym['E']})")
        _check("head_mask", self.head_mask, (self.num_layers, sym["H"]), np.float32)
        _check("expert_override", self.expert_override, (self.num_layers, sym["T"], sym["K"]), np.int64)
        if self.tokens and len(self.tokens) != sym["T"]:
            raise TraceError(f"trace has {len(self.tokens)} token labels for {sym['T']} tokens")
        if len(self.vocab_labels) > sym["V"]:  # fewer: ids past the tokenizer (a padded embedding) read "#id"
            raise TraceError(f"trace has {len(self.vocab_labels)} vocab labels for a vocabulary of {sym['V']}")
        return self

    def _check_field(self, name: str, a, shape: tuple[int, ...], dtype: type) -> None:
        if a is None and self.fields is not None and name not in self.fields:
            return  # not requested by a partial run
        _check(name, a, shape, dtype)

    # ---------------------------------------------------------- raw numbers
    def nonfinite_fields(self) -> list[str]:
        """Output names of the float fields holding NaN or an infinity, in output order.

        The causal mask's -inf in `scores` is by design and does not count; +inf or NaN there does.
        Looked for once per trace (the arrays are read-only): the app's worker asks before the UI does.
        """
        found = self.__dict__.get("_nonfinite")   # a frozen dataclass: kept beside the fields, not in them
        if found is None:
            found = self.__dict__["_nonfinite"] = tuple(self._find_nonfinite())
        return list(found)

    def _find_nonfinite(self) -> list[str]:
        found = []
        for name, a in self.to_arrays().items():
            if a.dtype.kind != "f" or name in ("head_mask",):
                continue
            bad = np.isnan(a) | (a == np.inf) if name.endswith(".scores") else ~np.isfinite(a)
            if bad.any():
                found.append(name)
        return found

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every field under its ONNX output name (no batch axis), plus input_ids: what trace.npz holds."""
        arrays: dict[str, np.ndarray] = {"input_ids": self.input_ids, "embed": self.embed}
        for l, layer in enumerate(self.layers):
            for name, _, _ in LAYER_FIELDS + SUMMARY_FIELDS:
                arrays[f"layers.{l}.{name}"] = getattr(layer, name)
        arrays["final_norm"] = self.final_norm
        arrays["logits"] = self.logits
        arrays["head_mask"] = self.head_mask
        arrays["expert_override"] = self.expert_override
        if self.interventions is not None:  # ablate_mode, experts_off and the patches, beside the two above
            arrays.update(self.interventions.to_arrays())
        return {name: a for name, a in arrays.items() if a is not None}  # a partial trace has fewer

    @classmethod
    def from_outputs(cls, config: ModelConfig, input_ids: np.ndarray, outputs: Mapping[str, np.ndarray],
                     **extra: Any) -> "Trace":
        """Assemble a Trace from arrays keyed by output name (batch axis already removed).

        The arrays are handed over, fresh from a run: they are made read-only in place, not copied
        (a big model's trace is hundreds of MB)."""
        for a in outputs.values():
            a.setflags(write=False)
        layers = tuple(  # .get: a partial run leaves out what it was not asked for
            LayerTrace(**{name: outputs.get(f"layers.{l}.{name}") for name, _, _ in LAYER_FIELDS + SUMMARY_FIELDS})
            for l in range(config.num_hidden_layers))
        return cls(config=config, input_ids=np.asarray(input_ids, np.int64), embed=outputs.get("embed"),
                   layers=layers, final_norm=outputs.get("final_norm"), logits=outputs.get("logits"), **extra)


def _check(name: str, a: np.ndarray, shape: tuple[int, ...], dtype: type) -> None:
    if not isinstance(a, np.ndarray):
        raise TraceError(f"{name}: expected a NumPy array, got {type(a).__name__}")
    if a.shape != shape:
        raise TraceError(f"{name}: shape {a.shape}, expected {shape}")
    if a.dtype != dtype:
        raise TraceError(f"{name}: dtype {a.dtype}, expected {np.dtype(dtype).name}")
