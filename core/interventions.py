"""Every intervention of one run, as one frozen value: what both runners honour and trace.npz records.

L layers, H heads, T tokens, Dh head size, D model width, E experts, K experts per token,
S = 1 + 2L residual stages (see `stage_names`):

  head_mask        [L, H] float32   1 keeps a head; 0 ablates it (values between scale it)
  ablate_mode      "zero" | "mean"  what an ablated head outputs instead: nothing, or its mean output
                                    over this sentence's T positions — the mean over t of the head's
                                    output *before* W_O, (attn @ v)[h, t, :], later positions included
                                    (a property of the sentence, not causal); a head kept at a fraction
                                    m outputs m * own + (1 - m) * mean
  expert_override  [L, T, K] int64  -1 lets the router choose that slot, e >= 0 forces expert e
  experts_off      [L, E] bool      switched off: the router takes its top K among the remaining
                                    experts and renormalises their probabilities to sum 1
  resid_patch      [S, T, D] float32, resid_patch_mask  [S, T] bool   write these residual-stream vectors
  head_patch       [L, H, T, Dh],     head_patch_mask   [L, H, T]     write these head outputs (before W_O;
                                                                      after any ablation)
  expert_patch     [L, E, T, D],      expert_patch_mask [L, E, T]     write these expert terms (the expert's
                                                                      output times its routing weight, 0
                                                                      where the token did not go to it)

A patch replaces the run's own value where its mask is True (`x * (1 - m) + m * v`), so a run
patched nowhere is exactly the unpatched run. Absent fields mean "no intervention";
`filled(config, T)` gives the validated form with every array present.

`Switches` is the on/off view of the ablations a user edits (heads and experts, the ablate mode):
what the Interventions panel draws and exports, and the run it asks for.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from core.config import ModelConfig
from core.raw_export import csv_text

ABLATE_MODES = ("zero", "mean")
PATCHES = (("resid_patch", "resid_patch_mask"), ("head_patch", "head_patch_mask"),
           ("expert_patch", "expert_patch_mask"))
ARRAY_FIELDS = ("head_mask", "expert_override", "experts_off",
                *(name for pair in PATCHES for name in pair))
_DTYPES = dict(head_mask=np.float32, expert_override=np.int64, experts_off=np.bool_,
               resid_patch=np.float32, head_patch=np.float32, expert_patch=np.float32,
               resid_patch_mask=np.bool_, head_patch_mask=np.bool_, expert_patch_mask=np.bool_)


def stage_names(num_layers: int) -> tuple[str, ...]:
    """The residual stream's stages in order: embedding, then per layer after attention and after the layer
    (the trace's own output names: `embed`, `layers.{l}.resid_mid`, `layers.{l}.resid_post`)."""
    names = ["embed"]
    for l in range(num_layers):
        names += [f"layers.{l}.resid_mid", f"layers.{l}.resid_post"]
    return tuple(names)


def residual_stages(trace) -> list[np.ndarray]:  # -> S x [T, D], in stage_names order
    """The residual stream of a Trace at every stage, as the trace holds it (no copy)."""
    stages = [trace.embed]
    for layer in trace.layers:
        stages += [layer.resid_mid, layer.resid_post]
    return stages


_NONE_VALUES = dict(head_mask=np.float32(1), expert_override=np.int64(-1))   # the rest: zeros / False


def _none_value(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The "no intervention" value of a field as a read-only zero-strided view: no memory of its own.
    head_mask is the one field fed to ONNX Runtime as it is, which wants a real buffer: [L, H] is small."""
    dtype = _DTYPES[name]
    value = _NONE_VALUES.get(name, dtype(0))
    if name == "head_mask":
        return _frozen(np.full(shape, value, dtype), dtype)
    return np.broadcast_to(np.asarray(value, dtype), shape)


def _frozen(a: np.ndarray | None, dtype) -> np.ndarray | None:
    if a is None:
        return None
    a = np.array(a, dtype=dtype)  # a private copy: the caller's array may change later
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Interventions:
    head_mask: np.ndarray | None = None
    ablate_mode: str = "zero"
    expert_override: np.ndarray | None = None
    experts_off: np.ndarray | None = None
    resid_patch: np.ndarray | None = None
    resid_patch_mask: np.ndarray | None = None
    head_patch: np.ndarray | None = None
    head_patch_mask: np.ndarray | None = None
    expert_patch: np.ndarray | None = None
    expert_patch_mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name, dtype in _DTYPES.items():
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        if self.ablate_mode not in ABLATE_MODES:
            raise ValueError(f"ablate mode must be zero or mean, got {self.ablate_mode!r}")
        for values, mask in PATCHES:
            if (getattr(self, values) is None) != (getattr(self, mask) is None):
                raise ValueError(f"{values} and {mask} come together: give both or neither")

    # ---------------------------------------------------------- what is on
    @property
    def mean_ablation(self) -> bool:
        return self.ablate_mode == "mean"

    def patches(self, values: str) -> bool:
        """True when the patch `values` (e.g. "resid_patch") writes anywhere."""
        mask = getattr(self, f"{values}_mask")
        return mask is not None and bool(mask.any())

    def switches_experts_off(self) -> bool:
        return self.experts_off is not None and bool(self.experts_off.any())

    def describe(self) -> str:
        """One line naming what is off or patched ("" for a plain run), for banners and the status bar."""
        parts = []
        if self.head_mask is not None and (self.head_mask != 1).any():
            heads = ", ".join(f"{l}.{h}" for l, h in zip(*np.nonzero(self.head_mask != 1)))
            parts.append(f"heads {heads} ablated ({self.ablate_mode})")
        if self.switches_experts_off():
            experts = ", ".join(f"{l}.{e}" for l, e in zip(*np.nonzero(self.experts_off)))
            parts.append(f"experts {experts} off")
        if self.expert_override is not None and (self.expert_override >= 0).any():
            parts.append(f"{int((self.expert_override >= 0).sum())} routing slot(s) forced")
        for values, mask in PATCHES:
            if self.patches(values):
                parts.append(f"{values.replace('_', ' ')}ed at {int(getattr(self, mask).sum())} site(s)")
        return "; ".join(parts)

    # ---------------------------------------------------------- validation
    def filled(self, config: ModelConfig, n_tokens: int) -> "Interventions":
        """Every array present, shapes checked against the model and the T tokens; ValueError names the problem.

        What was not given is a read-only broadcast of its "none" value (zero-strided, no memory): a run
        with nothing in force builds no [S, T, D] patch arrays, and given arrays are not copied again.
        """
        L, H, K, E = (config.num_hidden_layers, config.num_attention_heads,
                      config.num_experts_per_tok, config.num_local_experts)
        T, D, Dh, S = n_tokens, config.hidden_size, config.head_dim, 1 + 2 * config.num_hidden_layers
        shapes = dict(head_mask=(L, H), expert_override=(L, T, K), experts_off=(L, E),
                      resid_patch=(S, T, D), resid_patch_mask=(S, T), head_patch=(L, H, T, Dh),
                      head_patch_mask=(L, H, T), expert_patch=(L, E, T, D), expert_patch_mask=(L, E, T))
        result = copy.copy(self)   # not replace(): __post_init__ would copy every array once more
        for name, shape in shapes.items():
            given = getattr(self, name)
            if given is None:
                given = _none_value(name, shape)
            elif given.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {given.shape}")
            object.__setattr__(result, name, given)
        result._check_routing(E, K)
        return result

    def _check_routing(self, num_experts: int, k: int) -> None:
        override, off = self.expert_override, self.experts_off
        if override.size and (override.min() < -1 or override.max() >= num_experts):
            raise ValueError(f"expert_override entries must be -1 or an expert in [0, {num_experts})")
        for l in range(off.shape[0]):
            remaining = num_experts - int(off[l].sum())
            if remaining < k:
                raise ValueError(f"layer {l} keeps {remaining} expert(s) switched on; the router needs at least {k}")
            forced_off = [e for e in np.unique(override[l][override[l] >= 0]) if off[l, e]]
            if forced_off:
                raise ValueError(f"expert {l}.{forced_off[0]} is both switched off and forced by expert_override")

    # ---------------------------------------------------------- trace.npz form
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The filled form as named arrays (ablate_mode as a 0-d string array); from_arrays reads it back."""
        missing = [name for name in ARRAY_FIELDS if getattr(self, name) is None]
        if missing:
            raise ValueError(f"to_arrays needs the filled form (call filled() first); {missing[0]} is absent")
        return {"ablate_mode": np.array(self.ablate_mode), **{name: getattr(self, name) for name in ARRAY_FIELDS}}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "Interventions":
        """Read the arrays written by to_arrays (extra keys, e.g. the rest of a trace.npz, are ignored)."""
        mode = str(arrays["ablate_mode"]) if "ablate_mode" in arrays else "zero"
        return cls(ablate_mode=mode, **{name: arrays[name] for name in ARRAY_FIELDS if name in arrays})


# ---------------------------------------------------------------- building from sites

def _what_is_off(mask: np.ndarray | None, off) -> np.ndarray | None:
    """mask while off(mask) switches something off; None (everything on) otherwise."""
    return mask if mask is not None and np.asarray(off(np.asarray(mask))).any() else None


def same_ablations(a: Interventions | None, b: Interventions | None) -> bool:
    """Whether runs with `a` and with `b` had the same heads and experts switched off, the same way
    (None, or a mask that switches nothing off, is everything on; patches and routing are not compared)."""
    a, b = a or Interventions(), b or Interventions()
    heads = [_what_is_off(i.head_mask, lambda m: m != 1) for i in (a, b)]
    experts = [_what_is_off(i.experts_off, lambda m: m) for i in (a, b)]

    def equal(x, y) -> bool:
        return (x is None) == (y is None) and (x is None or np.array_equal(x, y))

    return equal(*heads) and equal(*experts) and (heads[0] is None or a.ablate_mode == b.ablate_mode)


def head_mask_off(config: ModelConfig, heads: list[tuple[int, int]]) -> np.ndarray:  # -> [L, H]
    """A head mask with the listed (layer, head) pairs at 0 and every other head at 1."""
    mask = np.ones((config.num_hidden_layers, config.num_attention_heads), np.float32)
    for l, h in heads:
        mask[l, h] = 0.0
    return mask


def experts_off_mask(config: ModelConfig, experts: list[tuple[int, int]]) -> np.ndarray:  # -> [L, E] bool
    off = np.zeros((config.num_hidden_layers, config.num_local_experts), bool)
    for l, e in experts:
        off[l, e] = True
    return off


def parse_sites(text: str, what: str, num_layers: int, per_layer: int) -> list[tuple[int, int]]:
    """Parse "L.U,L.U" (e.g. "0.1,1.3"); ValueError naming the bad site and the valid range."""
    sites = []
    for item in (part.strip() for part in text.split(",")):
        layer, _, unit = item.partition(".")
        if not (layer.isdigit() and unit.isdigit()):
            raise ValueError(f"{what} {item!r} is not LAYER.INDEX (e.g. 0.1)")
        l, u = int(layer), int(unit)
        if l >= num_layers or u >= per_layer:
            raise ValueError(f"{what} {l}.{u} does not exist: layers 0-{num_layers - 1}, "
                             f"{what}s 0-{per_layer - 1} in each")
        sites.append((l, u))
    return sites


# ---------------------------------------------------------------- the on/off switches a user edits

@dataclass(frozen=True, eq=False)
class Switches:
    """Every head and expert on or off, and what an ablated head outputs: what the Interventions panel
    edits, draws (a layer × (heads, then experts) matrix) and exports. A head is on when its mask is 1."""
    heads_on: np.ndarray     # [L, H] bool
    experts_on: np.ndarray   # [L, E] bool
    ablate_mode: str = "zero"

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads_on", _frozen(self.heads_on, np.bool_))
        object.__setattr__(self, "experts_on", _frozen(self.experts_on, np.bool_))
        if self.ablate_mode not in ABLATE_MODES:
            raise ValueError(f"ablate mode must be zero or mean, got {self.ablate_mode!r}")

    @classmethod
    def in_force(cls, interventions: Interventions | None, config: ModelConfig) -> "Switches":
        """The switches of a run's interventions (None: everything on)."""
        L, H, E = config.num_hidden_layers, config.num_attention_heads, config.num_local_experts
        given = interventions or Interventions()
        heads_on = np.ones((L, H), bool) if given.head_mask is None else given.head_mask == 1
        experts_on = np.ones((L, E), bool) if given.experts_off is None else ~given.experts_off
        return cls(heads_on, experts_on, given.ablate_mode)

    def interventions(self) -> Interventions:
        """The run these switches ask for."""
        return Interventions(head_mask=self.heads_on.astype(np.float32), ablate_mode=self.ablate_mode,
                             experts_off=~self.experts_on)

    def matrix(self) -> np.ndarray:  # -> [L, H + E] bool
        """One row per layer: its heads, then its experts; True where on."""
        return np.concatenate([self.heads_on, self.experts_on], axis=1)

    def csv(self) -> str:
        """kind, layer, index, on: a row per head and per expert, then the ablate mode."""
        rows = [["kind", "layer", "index", "on"]]
        rows += [["head", l, h, int(on)] for (l, h), on in np.ndenumerate(self.heads_on)]
        rows += [["expert", l, e, int(on)] for (l, e), on in np.ndenumerate(self.experts_on)]
        return csv_text(rows + [["ablate_mode", "", "", self.ablate_mode]])


__all__ = ["Interventions", "Switches", "ABLATE_MODES", "stage_names", "residual_stages", "head_mask_off",
           "experts_off_mask", "parse_sites"]
