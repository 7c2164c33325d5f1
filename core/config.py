"""Model hyper-parameters, spelled with Hugging Face MixtralConfig key names."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

# Inclusive bounds per key. A small transformer meant to be looked at: every limit is far above
# any model this app can show usefully, and far below what would exhaust memory before a check runs
# (a 10^9-layer config is refused here, before a single weight shape is computed).
BOUNDS: dict[str, tuple[float, float]] = {
    "vocab_size": (257, 262_144),            # 256 bytes + at least one special token
    "hidden_size": (2, 8_192),
    "intermediate_size": (1, 32_768),
    "num_hidden_layers": (1, 64),
    "num_attention_heads": (1, 128),
    "num_key_value_heads": (1, 128),
    "num_local_experts": (1, 64),
    "num_experts_per_tok": (1, 64),
    "rope_theta": (2.0, 1e12),               # theta <= 1 would make the slow pairs spin fastest
    "rms_norm_eps": (1e-12, 1.0),
    "max_position_embeddings": (1, 8_192),   # the attention panel holds [H, T, T] per layer
}
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few hundred bytes; refuse a huge one before parsing it


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 2048
    hidden_size: int = 128          # D, the residual stream width
    intermediate_size: int = 384    # each SwiGLU expert's hidden width
    num_hidden_layers: int = 2      # L
    num_attention_heads: int = 4    # H query heads
    num_key_value_heads: int = 4    # < H means grouped-query attention
    num_local_experts: int = 4      # E
    num_experts_per_tok: int = 2    # k, the router's top-k
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 256  # the context length the app accepts
    tie_word_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def validate(self) -> None:
        """Raise ValueError naming the first key that makes no sense."""
        for name, (lo, hi) in BOUNDS.items():
            value = getattr(self, name)
            if not (math.isfinite(value) and lo <= value <= hi):  # NaN fails every comparison: test it first
                raise ValueError(f"config.json: {name} must lie in [{lo:g}, {hi:g}], got {value:g}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("config.json: hidden_size must be divisible by num_attention_heads")
        if self.head_dim % 2:
            raise ValueError("config.json: the head size (hidden_size / num_attention_heads) must be even for RoPE")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError("config.json: num_experts_per_tok must not exceed num_local_experts")

    def to_dict(self) -> dict[str, Any]:
        # The extra keys make the file read as a real MixtralConfig.
        return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                "hidden_act": "silu", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        known = {f.name: f.type for f in fields(cls)}
        missing = [k for k in known if k not in data]
        if missing:
            raise ValueError(f"config.json: missing key(s) {', '.join(missing)}")
        defaults = cls()
        values = {f.name: _parse_value(f.name, data[f.name], type(getattr(defaults, f.name))) for f in fields(cls)}
        config = cls(**values)
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


def _refuse_constant(word: str) -> float:
    # Python's json reads NaN and Infinity, which JSON itself does not allow.
    raise ValueError(f"{word} is not a JSON number")


def _parse_value(name: str, raw: Any, kind: type) -> Any:
    """One config value as `kind`: finite, and whole where the key counts something."""
    if kind is bool:
        if not isinstance(raw, bool):
            raise ValueError(f"config.json: {name} must be true or false")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"config.json: {name} must be a number, got {raw!r}")
    lo, hi = BOUNDS[name]
    # Compare before converting: a 400-digit integer overflows float(), NaN has no int().
    if not (isinstance(raw, int) or math.isfinite(raw)) or not lo <= raw <= hi:
        raise ValueError(f"config.json: {name} must lie in [{lo:g}, {hi:g}], got {_short(raw)}")
    if kind is int and raw != int(raw):
        raise ValueError(f"config.json: {name} must be a whole number, got {raw!r}")
    return kind(raw)


def _short(raw: float | int) -> str:
    text = repr(raw)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"
