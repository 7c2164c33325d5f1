"""Position information, two ways: the original Transformer's sinusoids and the model's RoPE.

Pure NumPy, no Qt. The RoPE helpers read the model's own vectors from a Trace and reuse
core.model's rotate-half convention: pair i is dimensions (i, i + Dh/2), turned by m·θ_i at
position m with θ_i = rope_theta^(-2i/Dh). Nothing here re-runs the model: "before" and "after"
arrows come straight from the Trace (q and q_rot); the relative-position demo only moves the
trace's own q and k to other positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.model import rope_inv_freq, rotate_half
from core.raw_export import csv_text, matrix_csv_text
from core.trace import Trace

SINUSOID_BASE = 10000.0  # "Attention is all you need", section 3.5


# ---------------------------------------------------------------- sinusoidal (the original Transformer)

def sinusoidal_table(n_positions: int, d_model: int) -> np.ndarray:  # -> [T, D]
    """PE[pos, 2j] = sin(pos / 10000^(2j/D)), PE[pos, 2j+1] = cos(pos / 10000^(2j/D)).

    The paper interleaves sin and cos (even dims sin, odd dims cos), unlike RoPE's halves.
    """
    return sinusoidal_values(np.arange(n_positions, dtype=np.float64), d_model).astype(np.float32)


def sinusoidal_values(positions: np.ndarray, d_model: int) -> np.ndarray:  # [N] (may be fractional) -> [N, D]
    """The same formula at any (also fractional) positions, for smooth curves between tokens."""
    j = np.arange(d_model) // 2                                    # [D] frequency index of each dim
    angle = positions[:, None] / SINUSOID_BASE ** (2 * j / d_model)[None, :]  # [N, D]
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))


def sinusoidal_dims_to_show(d_model: int) -> list[int]:
    """A sin/cos pair of the fastest frequency, then sin dims ever slower (D/8, D/4, D/2)."""
    slower = [2 * (d_model // 16), 2 * (d_model // 8), 2 * (d_model // 4)]  # even: sin dims
    return sorted({d for d in [0, 1, *slower] if d < d_model})


def embed_plus_pe(embed: np.ndarray) -> np.ndarray:  # [T, D] -> [T, D]
    """What the original Transformer feeds its first block: token embedding + position encoding."""
    return (embed + sinusoidal_table(*embed.shape)).astype(np.float32)


def dim_names(d: int) -> list[str]:
    return [f"dim {j}" for j in range(d)]


@dataclass(frozen=True)
class SinusoidalView:
    """The paper's table for one sentence, and a few of its dimensions as smooth curves over position."""
    table: np.ndarray      # [T, D] PE at the sentence's positions
    dims: tuple[int, ...]  # the dimensions drawn as curves
    smooth: np.ndarray     # [S] fractional positions 0 .. T-1
    curves: np.ndarray     # [S, D] PE at those positions

    def csv(self) -> str:
        n, d = self.table.shape
        return matrix_csv_text(self.table, [str(i) for i in range(n)], dim_names(d), corner="position")


def sinusoidal_view(n_positions: int, d_model: int, samples: int = 240) -> SinusoidalView:
    smooth = np.linspace(0, max(n_positions - 1, 1), samples)
    return SinusoidalView(sinusoidal_table(n_positions, d_model), tuple(sinusoidal_dims_to_show(d_model)),
                          smooth, sinusoidal_values(smooth, d_model))


@dataclass(frozen=True)
class EmbedPlusPe:
    """This run's token embedding (optionally × √D, as the paper does) and what adding the PE would give."""
    labels: tuple[str, ...]   # [T] "position token"
    factor: float             # 1, or √D
    embedding: np.ndarray     # [T, D] trace.embed × factor
    summed: np.ndarray        # [T, D] embedding + PE

    @property
    def rms_embedding(self) -> float:
        return float(np.sqrt(np.mean(self.embedding.astype(np.float64) ** 2)))

    @property
    def rms_pe(self) -> float:
        return float(np.sqrt(np.mean((self.summed - self.embedding).astype(np.float64) ** 2)))

    @property
    def limit(self) -> float:
        """One symmetric colour scale for both matrices."""
        return float(max(np.abs(self.summed).max(), np.abs(self.embedding).max(), 1e-6))

    def csv(self) -> str:
        corner = "token \\ embedding×√D + PE" if self.factor != 1.0 else "token \\ embedding + PE"
        return matrix_csv_text(self.summed, self.labels, dim_names(self.summed.shape[1]), corner=corner)

    def embedding_csv(self) -> str:
        return matrix_csv_text(self.embedding, self.labels, dim_names(self.embedding.shape[1]),
                               corner="token \\ embedding")


def embed_plus_pe_view(trace: Trace, scale_by_sqrt_d: bool) -> EmbedPlusPe:
    factor = float(np.sqrt(trace.config.hidden_size)) if scale_by_sqrt_d else 1.0
    embedding = (trace.embed * np.float32(factor)).astype(np.float32)
    return EmbedPlusPe(tuple(f"{i} {label}" for i, label in enumerate(trace.labels())), factor, embedding,
                       embed_plus_pe(embedding))


# ---------------------------------------------------------------- RoPE: angles

def pair_dims(head_dim: int) -> np.ndarray:  # -> [Dh/2, 2]
    """The rotate-half pairing core.model uses: pair i is dimensions (i, i + Dh/2)."""
    half = head_dim // 2
    return np.stack([np.arange(half), np.arange(half) + half], axis=1)


def pair_frequencies(head_dim: int, theta: float, scaling: tuple = ()) -> np.ndarray:  # -> [Dh/2] radians per position
    # The model's own float32 θ_i (after its RoPE scaling, if any), widened so m·θ_i carries no extra rounding.
    return rope_inv_freq(head_dim, theta, scaling).astype(np.float64)


def pair_angles(positions: np.ndarray, head_dim: int, theta: float,
                scaling: tuple = ()) -> np.ndarray:  # [N] -> [N, Dh/2]
    """m·θ_i, unwrapped (radians; may be many turns)."""
    return np.asarray(positions, np.float64)[:, None] * pair_frequencies(head_dim, theta, scaling)[None, :]


@dataclass(frozen=True)
class PairAngles:
    """Every pair's angle m·θ_i over the model's whole context."""
    frequency: np.ndarray   # [P] θ_i, radians per position
    angles: np.ndarray      # [N, P] unwrapped, N = the context

    @property
    def wrapped(self) -> np.ndarray:  # [N, P] in [0, 2π)
        return wrap_angle(self.angles)

    @property
    def wrap_breaks(self) -> np.ndarray:  # [N, P] bool: False where the next point has wrapped past 2π
        wrapped = self.wrapped
        return np.vstack([np.diff(wrapped, axis=0) >= 0, np.ones((1, wrapped.shape[1]), bool)])

    def csv(self) -> str:
        n, p = self.angles.shape
        return matrix_csv_text(self.angles, [str(i) for i in range(n)],
                               [f"pair {i} (rad, unwrapped)" for i in range(p)], corner="position m")


def pair_angle_view(head_dim: int, theta: float, scaling: tuple, context: int) -> PairAngles:
    return PairAngles(pair_frequencies(head_dim, theta, scaling),
                      pair_angles(np.arange(context), head_dim, theta, scaling))


@dataclass(frozen=True)
class WrappedLine:
    """One pair's angle m·θ_i wrapped to [0, 2π) over positions 0…end, exactly: a sawtooth is straight between
    the positions where it wraps (m = 2πk / θ_i), so its corners are all a drawing needs (a fast pair over
    256 positions: 84 points, not thousands of samples)."""
    positions: np.ndarray   # [N] 0, each wrap twice (at 2π, then at 0), end
    angles: np.ndarray      # [N] in [0, 2π]: 2π only where a piece ends at its wrap
    connect: np.ndarray     # [N] bool: False where the line breaks (from 2π back to 0)


def wrapped_line(frequency: float, end: float) -> WrappedLine:
    """m·θ wrapped to [0, 2π) for m in [0, end], as straight pieces broken where they wrap."""
    turns = int(np.floor(frequency * end / (2 * np.pi))) if frequency > 0 else 0
    wraps = 2 * np.pi * np.arange(1, turns + 1) / frequency if turns else np.zeros(0)   # [K] where it wraps
    wraps = wraps[wraps < end]   # a wrap exactly at `end` ends the line at 2π: no piece after it
    positions = np.concatenate([[0.0], np.repeat(wraps, 2), [float(end)]])
    angles = np.concatenate([[0.0], np.tile([2 * np.pi, 0.0], len(wraps)), [min(2 * np.pi, max(0.0, frequency * end - 2 * np.pi * len(wraps)))]])
    connect = np.ones(len(positions), bool)
    connect[1:-1:2] = False   # each piece's end (at 2π) is not joined to the next piece's start (at 0)
    return WrappedLine(positions, angles, connect)


def wrap_angle(angle: np.ndarray) -> np.ndarray:
    """Angles folded into [0, 2π): where the pair's arrow actually points."""
    return np.mod(angle, 2 * np.pi)


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:  # [..., Dh], [..., Dh/2] -> [..., Dh] float64
    """RoPE in the rotate-half convention, in float64 (core.model.apply_rope is float32).

    Used only to move the trace's q/k to positions the sentence does not have; float64 keeps
    the relative-position identity exact to ~1e-12 rather than float32's ~1e-5.
    """
    both = np.concatenate([angles, angles], axis=-1)
    x = np.asarray(x, np.float64)
    return x * np.cos(both) + rotate_half(x) * np.sin(both)


# ---------------------------------------------------------------- RoPE: one token's pairs

@dataclass(frozen=True)
class RopePairs:
    """One query vector's Dh/2 planes, before and after rotation, exactly as the runner computed them."""
    position: int
    dims: np.ndarray        # [P, 2] the two dimensions of each pair
    frequency: np.ndarray   # [P] θ_i, radians per position
    angle: np.ndarray       # [P] m·θ_i, unwrapped
    before: np.ndarray      # [P, 2] (q[i], q[i+Dh/2]) from trace q
    after: np.ndarray       # [P, 2] the same from trace q_rot

    @property
    def measured_angle(self) -> np.ndarray:  # [P] in [0, 2π): the turn from `before` to `after`
        turn = np.arctan2(self.after[:, 1], self.after[:, 0]) - np.arctan2(self.before[:, 1], self.before[:, 0])
        return wrap_angle(turn)

    @property
    def length(self) -> np.ndarray:  # [P] a rotation keeps each pair's length
        return np.hypot(self.before[:, 0], self.before[:, 1])

    def csv(self) -> str:
        rows = [("pair", "dim_a", "dim_b", "position_m", "theta_i_rad_per_position", "m_theta_i_rad",
                 "turned_deg_measured", "q_a_before", "q_b_before", "q_a_after", "q_b_after")]
        turned = np.degrees(self.measured_angle)
        for i in range(len(self.angle)):
            rows.append((i, int(self.dims[i, 0]), int(self.dims[i, 1]), self.position, repr(float(self.frequency[i])),
                         repr(float(self.angle[i])), repr(float(turned[i])),
                         *(repr(float(v)) for v in (*self.before[i], *self.after[i]))))
        return csv_text(rows)


def split_pairs(vector: np.ndarray) -> np.ndarray:  # [Dh] -> [P, 2]
    half = vector.shape[-1] // 2
    return np.stack([vector[:half], vector[half:]], axis=1)


def query_pairs(trace: Trace, layer: int, head: int, position: int) -> RopePairs:
    lt = trace.layers[layer]
    head_dim, theta, scaling = trace.config.head_dim, trace.config.rope_theta, trace.config.rope_scaling
    return RopePairs(position=position, dims=pair_dims(head_dim),
                     frequency=pair_frequencies(head_dim, theta, scaling),
                     angle=pair_angles(np.array([position]), head_dim, theta, scaling)[0],
                     before=split_pairs(lt.q[head, position]), after=split_pairs(lt.q_rot[head, position]))


def pair_trail(pairs: RopePairs, positions: np.ndarray, pair: int) -> np.ndarray:  # [N] -> [N, 2]
    """Where pair `pair` of this q would point at other positions (same vector, other m)."""
    angle = np.asarray(positions, np.float64) * pairs.frequency[pair]
    x, y = pairs.before[pair].astype(np.float64)
    return np.stack([x * np.cos(angle) - y * np.sin(angle), x * np.sin(angle) + y * np.cos(angle)], axis=1)


# ---------------------------------------------------------------- RoPE: the relative-position property

def rotated_dot(q: np.ndarray, k: np.ndarray, query_pos: np.ndarray, key_pos: np.ndarray,
                theta: float, scaling: tuple = ()) -> np.ndarray:  # [Dh], [Dh], [N], [N] -> [N]
    """RoPE(q, m)·RoPE(k, n) for each (m, n): the unscaled attention score at those positions."""
    head_dim = q.shape[-1]
    q_at = rotate(np.broadcast_to(q, (len(query_pos), head_dim)), pair_angles(query_pos, head_dim, theta, scaling))
    k_at = rotate(np.broadcast_to(k, (len(key_pos), head_dim)), pair_angles(key_pos, head_dim, theta, scaling))
    return np.einsum("nd,nd->n", q_at, k_at)


@dataclass(frozen=True)
class RelativeDemo:
    """The trace's q (at m) and k (at n), moved together and apart, and their dot products."""
    query_pos: int
    key_pos: int
    context: int                 # positions 0 .. context-1 exist
    runner_dot: float            # q_rot[m]·k_rot[n] straight from the Trace
    shifts: np.ndarray           # [S] every s with both m+s and n+s inside the context
    dot_shift_both: np.ndarray   # [S] at (m+s, n+s): the same for every s
    dot_shift_query: np.ndarray  # [S] at (m+s, n): m−n changes, so does the dot
    distances: np.ndarray        # [N] 0 .. context-1
    dot_by_distance: np.ndarray  # [N] RoPE(q, d)·RoPE(k, 0)

    @property
    def distance(self) -> int:
        return self.query_pos - self.key_pos

    def example_shifts(self, count: int = 4) -> list[int]:
        """A few shifts to quote as numbers: 0 first, then spread over the allowed range."""
        picks = np.unique(np.round(np.linspace(self.shifts[0], self.shifts[-1], count + 1)).astype(int))
        return [0] + [int(s) for s in picks if s != 0][: count - 1]

    def dot_at_shift(self, shift: int) -> float:
        return float(self.dot_shift_both[int(np.searchsorted(self.shifts, shift))])

    def csv(self) -> str:
        rows = [("curve", "query_position", "key_position", "distance", "shift", "q_dot_k")]
        for s, both in zip(self.shifts, self.dot_shift_both):
            rows.append(("shift both", self.query_pos + s, self.key_pos + s, self.distance, s, repr(float(both))))
        for s, only in zip(self.shifts, self.dot_shift_query):
            rows.append(("shift query only", self.query_pos + s, self.key_pos, self.distance + s, s,
                         repr(float(only))))
        for dist, value in zip(self.distances, self.dot_by_distance):
            rows.append(("by distance", int(dist), 0, int(dist), "", repr(float(value))))
        rows.append(("runner q_rot.k_rot", self.query_pos, self.key_pos, self.distance, 0, repr(self.runner_dot)))
        return csv_text(rows)


def relative_demo(trace: Trace, layer: int, head: int, query_pos: int, key_pos: int) -> RelativeDemo:
    lt = trace.layers[layer]
    theta, context = trace.config.rope_theta, trace.config.max_position_embeddings
    scaling = trace.config.rope_scaling
    q, k = lt.q[head, query_pos], lt.k[head, key_pos]   # [Dh] each, before RoPE
    shifts = np.arange(-key_pos, context - query_pos)   # keeps 0 <= n+s and m+s < context (n <= m)
    distances = np.arange(context)
    zeros = np.zeros_like(distances)
    return RelativeDemo(
        query_pos=query_pos, key_pos=key_pos, context=context,
        runner_dot=float(np.dot(lt.q_rot[head, query_pos].astype(np.float64), lt.k_rot[head, key_pos])),
        shifts=shifts,
        dot_shift_both=rotated_dot(q, k, query_pos + shifts, key_pos + shifts, theta, scaling),
        dot_shift_query=rotated_dot(q, k, query_pos + shifts, np.full_like(shifts, key_pos), theta, scaling),
        distances=distances,
        dot_by_distance=rotated_dot(q, k, distances, zeros, theta, scaling))
