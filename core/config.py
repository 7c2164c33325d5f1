"""Model hyper-parameters, spelled with Hugging Face MixtralConfig key names."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


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
        positive = [f.name for f in fields(self) if f.name not in ("tie_word_embeddings",)]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"config.json: {name} must be positive, got {getattr(self, name)}")
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
        values = {}
        for f in fields(cls):
            raw = data[f.name]
            kind = type(getattr(cls(), f.name))
            if kind is bool:
                if not isinstance(raw, bool):
                    raise ValueError(f"config.json: {f.name} must be true or false")
                values[f.name] = raw
            elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise ValueError(f"config.json: {f.name} must be a number, got {raw!r}")
            elif kind is int and raw != int(raw):
                raise ValueError(f"config.json: {f.name} must be a whole number, got {raw!r}")
            else:
                values[f.name] = kind(raw)
        config = cls(**values)
        config.validate()
        return config

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "ModelConfig":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{Path(path).name}: not readable JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{Path(path).name}: expected a JSON object")
        return cls.from_dict(data)
