"""Model hyper-parameters of the one model family, spelled with Hugging Face config key names.

The shipped model is a miniature Mixtral and its config.json uses MixtralConfig keys. Imported
models (Llama, Mistral, Mixtral, Qwen2, Qwen3) keep the keys of their source config.json; the
options that tell the family members apart are fields here:

  dense SwiGLU MLP (``mlp.gate_proj/up_proj/down_proj``) or a mixture of experts (Mixtral only;
  a dense model has num_local_experts = num_experts_per_tok = 0), q/k/v biases (Qwen2; Llama and
  Qwen3 with attention_bias also bias o_proj; no other pair can be written, see BIASES), per-head
  q/k RMSNorm (Qwen3), an explicit head_dim,
  RoPE scaling (llama3, linear), a sliding attention window (Mistral), tied embeddings, GQA.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

SHIPPED_ARCHITECTURE = "MixtralForCausalLM"
# architecture -> (model_type, mixture of experts, per-head q/k norm, default rope_theta)
FAMILY: dict[str, tuple[str, bool, bool, float]] = {
    "LlamaForCausalLM": ("llama", False, False, 10000.0),
    "MistralForCausalLM": ("mistral", False, False, 10000.0),
    "MixtralForCausalLM": ("mixtral", True, False, 1e6),
    "Qwen2ForCausalLM": ("qwen2", False, False, 10000.0),
    "Qwen3ForCausalLM": ("qwen3", False, True, 10000.0),
}
ROPE_TYPES = ("default", "linear", "llama3")
# architecture -> the (q/k/v bias, o_proj bias) pairs its config.json can state, as transformers builds
# them: without attention_bias first, with it last. Llama's and Qwen3's attention_bias biases all four
# projections, Qwen2 always biases q/k/v and never o_proj, Mistral and Mixtral have none (attention_bias
# is ignored). Any other pair would be read back from config.json as a different model.
BIASES: dict[str, tuple[tuple[bool, bool], ...]] = {
    "LlamaForCausalLM": ((False, False), (True, True)),
    "MistralForCausalLM": ((False, False),),
    "MixtralForCausalLM": ((False, False),),
    "Qwen2ForCausalLM": ((True, False),),
    "Qwen3ForCausalLM": ((False, False), (True, True)),
}
_CORE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "rms_norm_eps", "max_position_embeddings")
_MOE_KEYS = ("num_local_experts", "num_experts_per_tok")

# Inclusive bounds per key, checked before any value is converted or any shape computed (a 10^9-layer
# config is refused here). Every limit is above the models this app can run usefully on a laptop
# (Llama 3 8B: 32 layers, d 4096, 14336 MLP, 128k vocab and context) and far below what would
# exhaust memory before the size checks in core.bundle run.
BOUNDS: dict[str, tuple[float, float]] = {
    "vocab_size": (2, 262_144),
    "hidden_size": (2, 16_384),
    "intermediate_size": (1, 65_536),
    "num_hidden_layers": (1, 128),
    "num_attention_heads": (1, 256),
    "num_key_value_heads": (1, 256),
    "num_local_experts": (0, 256),           # 0: a dense MLP
    "num_experts_per_tok": (0, 64),
    "rope_theta": (2.0, 1e12),               # theta <= 1 would make the slow pairs spin fastest
    "rms_norm_eps": (1e-12, 1.0),
    "max_position_embeddings": (1, 1 << 20),
    "head_dim": (2, 1_024),
    "sliding_window": (1, 1 << 20),
}
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few kilobytes; refuse a huge one before parsing it


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 2048
    hidden_size: int = 128          # D, the residual stream width
    intermediate_size: int = 384    # each SwiGLU expert's (or the dense MLP's) hidden width
    num_hidden_layers: int = 2      # L
    num_attention_heads: int = 4    # H query heads
    num_key_value_heads: int = 4    # < H means grouped-query attention
    num_local_experts: int = 4      # E (0 for a dense MLP)
    num_experts_per_tok: int = 2    # k, the router's top-k (0 for a dense MLP)
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 256  # the context length the app accepts
    tie_word_embeddings: bool = False
    # ---- family options (defaults are the shipped model's)
    architecture: str = SHIPPED_ARCHITECTURE
    explicit_head_dim: int = 0      # config.json "head_dim" (Qwen3); 0 means hidden_size / heads
    qkv_bias: bool = False          # q_proj/k_proj/v_proj have a bias (Qwen2, attention_bias)
    o_bias: bool = False            # o_proj has a bias (Llama/Qwen3 attention_bias)
    qk_norm: bool = False           # RMSNorm over each head's q and k before RoPE (Qwen3)
    rope_scaling: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) pairs, e.g. rope_type llama3
    sliding_window: int = 0         # a query sees at most this many keys (itself included); 0 = all
    # The source config.json verbatim (imported models), so the bundle keeps its keys; not compared.
    source: str = field(default="", compare=False, repr=False)

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return FAMILY[self.architecture][1]

    @property
    def model_type(self) -> str:
        return FAMILY[self.architecture][0]

    @property
    def rope_scaling_dict(self) -> dict[str, Any]:
        return dict(self.rope_scaling)

    def validate(self) -> None:
        """Raise ValueError naming the first key that makes no sense."""
        if self.architecture not in FAMILY:
            raise ValueError(f"config.json: architecture {self.architecture} is not one of {', '.join(FAMILY)}")
        for name, (lo, hi) in BOUNDS.items():
            value = getattr(self, name, None)
            if value is None or (name in ("head_dim", "sliding_window") and not value):
                continue  # head_dim is derived; sliding_window 0 means none
            if not (math.isfinite(value) and lo <= value <= hi):  # NaN fails every comparison: test it first
                raise ValueError(f"config.json: {name} must lie in [{lo:g}, {hi:g}], got {value:g}")
        if self.is_moe and not (self.num_local_experts and self.num_experts_per_tok):
            raise ValueError(f"config.json: {self.architecture} needs num_local_experts and num_experts_per_tok >= 1")
        if not self.is_moe and (self.num_local_experts or self.num_experts_per_tok):
            raise ValueError(f"config.json: {self.architecture} has a dense MLP, not experts")
        if not self.explicit_head_dim and self.hidden_size % self.num_attention_heads:
            raise ValueError("config.json: hidden_size must be divisible by num_attention_heads")
        if self.head_dim % 2:
            raise ValueError("config.json: the head size must be even for RoPE")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError("config.json: num_experts_per_tok must not exceed num_local_experts")
        if (self.qkv_bias, self.o_bias) not in BIASES[self.architecture]:
            can = " or ".join(_biases_text(*pair) for pair in BIASES[self.architecture])
            raise ValueError(f"config.json: a {self.architecture} with {_biases_text(self.qkv_bias, self.o_bias)} "
                             f"cannot be written (its config.json states {can})")
        if self.qk_norm != FAMILY[self.architecture][2]:   # fixed by the architecture: no key states it
            raise ValueError(f"config.json: a {self.architecture} {'without' if not self.qk_norm else 'with'} "
                             f"per-head q/k RMSNorm cannot be written (only Qwen3ForCausalLM has it, always)")
        rope_type = self.rope_scaling_dict.get("rope_type", "default")
        if rope_type not in ROPE_TYPES:
            raise ValueError(f"config.json: rope scaling type {rope_type!r} is not supported "
                             f"(supported: {', '.join(ROPE_TYPES)})")

    def to_dict(self) -> dict[str, Any]:
        # The extra keys make the file read as a real config of its architecture (MixtralConfig for
        # the shipped model); an imported model's own keys come first and are kept.
        own: dict[str, Any] = {"architectures": [self.architecture], "model_type": self.model_type,
                               "hidden_act": "silu"}
        own.update({f.name: getattr(self, f.name) for f in fields(self)
                    if f.name in _CORE_KEYS or f.name in ("num_key_value_heads", "rope_theta", "tie_word_embeddings")})
        if self.is_moe:
            own.update({k: getattr(self, k) for k in _MOE_KEYS})
        if self.explicit_head_dim:
            own["head_dim"] = self.explicit_head_dim
        if self.o_bias:   # only Llama and Qwen3 have one (BIASES): their attention_bias biases all four
            own["attention_bias"] = True
        if self.rope_scaling:
            own["rope_scaling"] = self.rope_scaling_dict
        if self.sliding_window:
            own["sliding_window"] = self.sliding_window
        source = json.loads(self.source) if self.source else {}
        if "rope_parameters" in source:  # transformers 5 spelling: theta and scaling live there
            for key in ("rope_theta", "rope_scaling"):
                own.pop(key, None)
        return {**source, **own}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        architecture = _architecture(data)
        moe = FAMILY[architecture][1]
        required = list(_CORE_KEYS) + (list(_MOE_KEYS) if moe else [])
        if architecture == SHIPPED_ARCHITECTURE:  # the shipped spelling names every key
            required += ["num_key_value_heads", "tie_word_embeddings"] + ([] if "rope_parameters" in data else ["rope_theta"])
        missing = [k for k in required if k not in data]
        if missing:
            raise ValueError(f"config.json: missing key(s) {', '.join(missing)}")
        _refuse_unsupported(data, architecture)
        rope_theta, rope_scaling = _rope(data, FAMILY[architecture][3])
        values: dict[str, Any] = {name: data[name] for name in required if name not in ("rope_theta",)}
        values["rope_theta"] = rope_theta
        values.setdefault("num_key_value_heads", data.get("num_key_value_heads") or data["num_attention_heads"])
        values.setdefault("tie_word_embeddings", data.get("tie_word_embeddings", False))
        if not moe:
            values.update(num_local_experts=0, num_experts_per_tok=0)
        values = {name: _typed(name, raw) for name, raw in values.items()}
        attention_bias = _typed("attention_bias", data.get("attention_bias", False))
        qkv_bias, o_bias = BIASES[architecture][-1 if attention_bias else 0]
        head_dim = data.get("head_dim")
        config = cls(**values, architecture=architecture,
                     explicit_head_dim=_typed("head_dim", head_dim) if head_dim is not None else 0,
                     qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=FAMILY[architecture][2], rope_scaling=rope_scaling,
                     sliding_window=_sliding_window(data, architecture), source=json.dumps(data))
        if config.explicit_head_dim * config.num_attention_heads == config.hidden_size:
            config = replace(config, explicit_head_dim=0)  # stated, but the usual value: nothing to record
        config.validate()
        return config

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "ModelConfig":
        name = Path(path).name
        try:
            if Path(path).stat().st_size > MAX_CONFIG_BYTES:
                raise ValueError(f"{name}: larger than {MAX_CONFIG_BYTES >> 10} KiB, not a model config")
            data = json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=_refuse_constant)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{name}: not readable JSON ({exc})") from None
        except RecursionError:
            raise ValueError(f"{name}: not readable JSON (nested too deeply)") from None
        if not isinstance(data, dict):
            raise ValueError(f"{name}: expected a JSON object")
        return cls.from_dict(data)


def _biases_text(qkv: bool, o: bool) -> str:
    return {(False, False): "no attention biases", (True, True): "q/k/v and o_proj biases",
            (True, False): "q/k/v biases only", (False, True): "an o_proj bias only"}[qkv, o]


def _refuse_constant(word: str) -> float:
    # Python's json reads NaN and Infinity, which JSON itself does not allow.
    raise ValueError(f"{word} is not a JSON number")


def _architecture(data: dict[str, Any]) -> str:
    names = data.get("architectures") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("config.json: architectures must be a list of names")
    if not names:  # a config saved without a model names only its model_type
        by_type = {v[0]: k for k, v in FAMILY.items()}
        names = [by_type.get(data.get("model_type"), f"model_type {data.get('model_type')!r}")]
    if names[0] not in FAMILY:
        raise ValueError(f"config.json: architecture {names[0]} is not supported "
                         f"(supported: {', '.join(FAMILY)})")
    return names[0]


def _refuse_unsupported(data: dict[str, Any], architecture: str) -> None:
    act = data.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"config.json: hidden_act {act!r} is not supported (the family uses silu)")
    if data.get("mlp_bias"):
        raise ValueError("config.json: mlp_bias true is not supported (supported: MLPs without bias)")
    if data.get("use_sliding_window"):
        raise ValueError(f"config.json: {architecture} with use_sliding_window true is not supported")
    if data.get("quantization_config"):
        kind = data["quantization_config"].get("quant_method", "?") if isinstance(data["quantization_config"], dict) else "?"
        raise ValueError(f"config.json: a quantised checkpoint ({kind}) is not supported "
                         "(supported: float32, float16 or bfloat16 weights)")


def _rope(data: dict[str, Any], default_theta: float) -> tuple[int | float, tuple[tuple[str, Any], ...]]:
    # transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; older files rope_theta + rope_scaling.
    params = data.get("rope_parameters") or {}
    scaling = dict(params) if params else dict(data.get("rope_scaling") or {})
    theta = scaling.pop("rope_theta", None) or data.get("rope_theta") or default_theta
    if "type" in scaling:  # the older spelling of rope_type
        scaling.setdefault("rope_type", scaling.pop("type"))
    if scaling.get("rope_type", "default") == "default":
        scaling = {}
    if not isinstance(theta, (int, float)) or isinstance(theta, bool):
        raise ValueError(f"config.json: rope_theta must be a number, got {theta!r}")
    return theta, tuple(sorted(scaling.items()))  # theta is bounded and converted by _typed


def _sliding_window(data: dict[str, Any], architecture: str) -> int:
    if architecture not in ("MistralForCausalLM", "MixtralForCausalLM"):
        return 0  # Qwen keeps sliding_window as a number even when use_sliding_window is false
    window = data.get("sliding_window")
    return _typed("sliding_window", window) if window else 0


_KINDS = {f.name: type(f.default) for f in fields(ModelConfig)} | {"attention_bias": bool}


def _typed(name: str, raw: Any) -> Any:
    """One config value as its field's type: finite, within BOUNDS, and whole where the key counts something."""
    kind = _KINDS.get(name, int)
    if kind is bool:
        if not isinstance(raw, bool):
            raise ValueError(f"config.json: {name} must be true or false")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"config.json: {name} must be a number, got {raw!r}")
    lo, hi = BOUNDS.get(name, (-math.inf, math.inf))
    # Compare before converting: a 400-digit integer overflows float(), NaN has no int().
    if not (isinstance(raw, int) or math.isfinite(raw)) or not lo <= raw <= hi:
        raise ValueError(f"config.json: {name} must lie in [{lo:g}, {hi:g}], got {_short(raw)}")
    if kind is int and raw != int(raw):
        raise ValueError(f"config.json: {name} must be a whole number, got {raw!r}")
    return kind(raw)


def _short(raw: float | int) -> str:
    text = repr(raw)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"
