"""A hand calculation of one attention head, redone on a real Trace's numbers.

For (layer, head, query, key) `head_calculation` returns every stage in order — X, Q, K, V,
RoPE, Q·Kᵀ, ÷√Dh, + causal mask, softmax, × V, the head's output, concatenation over heads,
× W_O, + residual — each recomputed from the stage before and the model's own weights, the
way a textbook does it by hand. The tests pin that every stage agrees with the Trace, so what
the panel shows is a calculation that provably reproduces the run, not a lookup.

Each Step carries its full matrix (for CSV) and which rows and columns to show (for long
sentences and wide vectors the panel shows a window, and says what it leaves out); a table with
room for more columns asks the step for them (Step.with_columns).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from core.model import F32, apply_rope, softmax
from core.raw_export import csv_text, matrix_csv_text
from core.trace import Trace

MAX_TOKENS_SHOWN = 12      # a whole short sentence fits; longer ones get a window
COLUMNS_SHOWN = 8          # value columns of a step's table until the table says how many fit
CONCAT_DIMS_PER_HEAD = 2   # at least, of each head's slice in the concatenation


@dataclass(frozen=True)
class Step:
    """One stage of the calculation: a matrix, how it was computed, and what to show of it."""
    key: str                       # stable lower_snake id: CSV name and card identity
    title: str
    formula: str
    note: str                      # one or two sentences: what happens here
    values: np.ndarray             # [R, C] the full matrix (float32; -inf where the mask removes a cell)
    row_labels: tuple[str, ...]    # R
    col_labels: tuple[str, ...]    # C
    row_axis: str                  # what the rows are, e.g. "tokens (queries)"
    col_axis: str
    rows: np.ndarray               # ascending indices of the rows shown
    cols: np.ndarray               # ascending indices of the columns shown
    highlight_rows: tuple[int, ...]  # the selected query's row (the key's, for rows of keys)
    highlight_cols: tuple[int, ...]  # the selected key's column, or this head's block of columns
    # n -> the columns to show when n number columns fit (cols is its answer for COLUMNS_SHOWN)
    column_window: Callable[[int], np.ndarray] = field(compare=False, repr=False)
    signed: bool = True            # signed values (diverging colours) or probabilities in [0, 1]
    # n -> the rows to show when n rows may be (rows is its answer for MAX_TOKENS_SHOWN); None: rows is all
    row_window: Callable[[int], np.ndarray] | None = field(default=None, compare=False, repr=False)

    def with_columns(self, columns: int) -> "Step":
        """This step with as many columns shown as `columns` number columns hold (a wider table)."""
        return replace(self, cols=np.asarray(self.column_window(columns)))

    def with_rows(self, rows: int) -> "Step":
        """This step with up to `rows` rows shown (a figure has room for more than a dock)."""
        return self if self.row_window is None else replace(self, rows=np.asarray(self.row_window(rows)))

    @property
    def shown(self) -> np.ndarray:  # [len(rows), len(cols)]
        return self.values[np.ix_(self.rows, self.cols)]

    @property
    def elided(self) -> str:
        """What the window leaves out, in words ('' when everything is shown)."""
        parts = []
        for axis, shown, total in ((self.row_axis, self.rows, self.values.shape[0]),
                                   (self.col_axis, self.cols, self.values.shape[1])):
            if len(shown) < total:
                left_out = np.setdiff1d(np.arange(total), shown)
                parts.append(f"{axis} {index_ranges(shown)} of {total} ({index_ranges(left_out)} left out)")
        return "shown: " + "; ".join(parts) if parts else ""

    def csv(self) -> str:
        """The full matrix, every row and column, at full precision."""
        return matrix_csv_text(self.values, self.row_labels, self.col_labels,
                               corner=f"{self.row_axis} \\ {self.col_axis}")


@dataclass(frozen=True)
class DotProduct:
    """score[i, j] written out: q_rot[i] · k_rot[j] term by term, summed, divided by √Dh."""
    query: int
    key: int
    q: np.ndarray          # [Dh] q_rot of the query token
    k: np.ndarray          # [Dh] k_rot of the key token
    terms: np.ndarray      # [Dh] q[d] * k[d] (float64)
    total: float           # sum of the terms
    scale: float           # √Dh
    score: float           # total / scale
    trace_score: float     # what the run computed: trace scores[h, i, j]

    def csv(self) -> str:
        rows: list[Sequence] = [("dim", "q_rot", "k_rot", "q_rot*k_rot")]
        rows += [(d, repr(float(a)), repr(float(b)), repr(float(t)))
                 for d, (a, b, t) in enumerate(zip(self.q, self.k, self.terms))]
        rows += [("sum", "", "", repr(self.total)), ("sqrt_dh", "", "", repr(self.scale)),
                 ("sum/sqrt_dh", "", "", repr(self.score)), ("trace_score", "", "", repr(self.trace_score))]
        return csv_text(rows)


@dataclass(frozen=True)
class HeadCalculation:
    layer: int
    head: int
    query: int
    key: int
    steps: tuple[Step, ...]
    dot: DotProduct
    from_weights: bool     # False when the trace carries no weights: Q, K, V are then the traced values

    def step(self, key: str) -> Step:
        return next(s for s in self.steps if s.key == key)


# ---------------------------------------------------------------- which rows and columns to show

def token_window(n_tokens: int, query: int, key: int, cap: int = MAX_TOKENS_SHOWN) -> np.ndarray:
    """All tokens of a short sentence; otherwise the first token, keys near the selected key and the
    query's neighbourhood, topped up with the tokens nearest the query until `cap` are shown."""
    if n_tokens <= cap:
        return np.arange(n_tokens)
    picked = {p for p in {0, *range(key - 2, key + 3), *range(query - 3, query + 2)} if 0 <= p < n_tokens}
    by_distance = sorted(range(n_tokens), key=lambda p: (abs(p - query), p))  # earlier tokens first on ties
    for p in by_distance:
        if len(picked) >= cap:
            break
        picked.add(p)
    return np.array(sorted(picked))


def head_dim_window(head_dim: int, columns: int = COLUMNS_SHOWN) -> np.ndarray:
    """At most `columns` dims: the first of each RoPE half alike (dim i turns together with dim i + Dh/2)."""
    if head_dim <= columns:
        return np.arange(head_dim)
    first = np.arange(max(1, columns // 2))
    return np.concatenate([first, first + head_dim // 2])


def model_dim_window(hidden_size: int, columns: int = COLUMNS_SHOWN) -> np.ndarray:
    return np.arange(min(hidden_size, columns))


def concat_window(num_heads: int, head_dim: int, head: int, columns: int = COLUMNS_SHOWN) -> np.ndarray:
    """The first dims of each head's slice (as many as `columns` allows, at least CONCAT_DIMS_PER_HEAD),
    so the concatenation's head blocks are visible side by side. Each block ends in a narrow "…" column
    (about half a number column): those come out of `columns` too."""
    heads = range(num_heads) if num_heads <= 8 else sorted({0, head - 1, head, head + 1, num_heads - 1} & set(range(num_heads)))
    per = min(max(CONCAT_DIMS_PER_HEAD, (columns - len(heads) // 2) // len(heads)), head_dim)
    return np.array([g * head_dim + d for g in heads for d in range(per)])


def index_ranges(indices: Sequence[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0–2, 5, 7–8'."""
    out, run = [], []
    for i in map(int, indices):
        if run and i != run[-1] + 1:
            out.append(_run_text(run))
            run = []
        run.append(i)
    if run:
        out.append(_run_text(run))
    return ", ".join(out)


def _run_text(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}"


# ---------------------------------------------------------------- the calculation

def _head_weights(trace: Trace, layer: int, head: int) -> dict[str, np.ndarray] | None:
    """This head's rows of q/k/v_proj ([Dh, D] each) and all of o_proj ([D, H*Dh]); None without weights."""
    cfg, p = trace.config, f"model.layers.{layer}.self_attn"
    names = [f"{p}.{n}_proj.weight" for n in "qkvo"]
    if not all(n in trace.weights for n in names):
        return None
    dh = cfg.head_dim
    kv_head = head // (cfg.num_attention_heads // cfg.num_key_value_heads)  # GQA: the k/v head this query head reads
    q_rows, kv_rows = slice(head * dh, (head + 1) * dh), slice(kv_head * dh, (kv_head + 1) * dh)
    return dict(q=trace.weights[names[0]][q_rows], k=trace.weights[names[1]][kv_rows],
                v=trace.weights[names[2]][kv_rows], o=trace.weights[names[3]], kv_head=kv_head)


def _layer_input(trace: Trace, layer: int) -> np.ndarray:  # -> [T, D] the residual stream entering the layer
    return trace.embed if layer == 0 else trace.layers[layer - 1].resid_post


def head_calculation(trace: Trace, layer: int, head: int, query: int, key: int) -> HeadCalculation:
    """Every stage of head `head` in layer `layer`, with the selected query row and key column marked.
    Each step's column_window gives its columns for a table's room; a table of keys shows at least
    MAX_TOKENS_SHOWN of them."""
    cfg, lt = trace.config, trace.layers[layer]
    t, dh, n_heads = trace.n_tokens, cfg.head_dim, cfg.num_attention_heads
    query = max(0, min(query, t - 1))
    key = max(0, min(key, query))
    w = _head_weights(trace, layer, head)
    positions = np.arange(t)

    # QKV: this head's slice of each projection (x @ W.T, PyTorch Linear orientation)
    x = lt.attn_in                                                        # [T, D]
    if w is not None and not (cfg.qkv_bias or cfg.qk_norm):
        q, k, v = x @ w["q"].T, x @ w["k"].T, x @ w["v"].T                 # [T, Dh] each
    else:  # no weights, or biases / q-k norms (Qwen): the traced q, k, v are what the head used
        q, k, v = lt.q[head], lt.k[head], lt.v[head]
    # RoPE: rotate q and k by position (never v) before the dot product
    q_rot = apply_rope(q[None], positions, cfg.rope_theta, cfg.rope_scaling)[0]  # [T, Dh]
    k_rot = apply_rope(k[None], positions, cfg.rope_theta, cfg.rope_scaling)[0]
    qk = q_rot @ k_rot.T                                                   # [T, T] every query with every key
    scaled = qk / F32(np.sqrt(dh))
    future = np.triu(np.ones((t, t), dtype=bool), k=1)                     # key after query: not yet written
    if cfg.sliding_window:                                                 # Mistral: keys too far back are hidden too
        future |= np.tril(np.ones((t, t), dtype=bool), k=-cfg.sliding_window)
    masked = np.where(future, F32(-np.inf), scaled).astype(F32)
    probs = softmax(masked)                                                # [T, T] rows sum to 1
    head_mask = float(trace.head_mask[layer, head])
    weighted_v = probs[query][:, None] * v                                 # [T, Dh] what each key adds to row `query`
    head_out = (probs @ v) * F32(head_mask)                                # [T, Dh]
    # the other heads' outputs come from the trace; this head's slot holds the value just computed
    all_heads = np.array(lt.head_out)
    all_heads[head] = head_out
    concat = all_heads.transpose(1, 0, 2).reshape(t, n_heads * dh)         # [T, H*Dh]
    attn_out = concat @ w["o"].T if w is not None else lt.attn_out         # [T, D]
    if w is not None and cfg.o_bias:
        attn_out = attn_out + trace.weights[f"model.layers.{layer}.self_attn.o_proj.bias"]
    resid_mid = _layer_input(trace, layer) + attn_out

    labels = tuple(f"{i} {trace.label(i)}" for i in range(t))
    dims = lambda n, prefix="d": tuple(f"{prefix}{i}" for i in range(n))  # noqa: E731
    tok_rows = lambda n: token_window(t, query, key, max(MAX_TOKENS_SHOWN, n))  # noqa: E731
    up_to_query = lambda n: tok_rows(n)[tok_rows(n) <= query]  # noqa: E731  (× V: the keys the query sees)
    key_cols = lambda n: token_window(t, query, key, max(MAX_TOKENS_SHOWN, n))  # noqa: E731
    hd_cols = lambda n: head_dim_window(dh, n)  # noqa: E731
    md_cols = lambda n: model_dim_window(cfg.hidden_size, n)  # noqa: E731
    concat_labels = tuple(f"h{g}.d{d}" for g in range(n_heads) for d in range(dh))

    def tokens_by(step_key, title, formula, note, values, col_labels, col_axis, cols, highlight_cols=(),
                  signed=True, rows=tok_rows, row_axis="tokens", highlight_row=query) -> Step:
        """cols: n -> the columns shown when n fit; rows: n -> the rows shown when n may be."""
        return Step(step_key, title, formula, note, np.asarray(values, F32), labels, tuple(col_labels),
                    row_axis, col_axis, np.asarray(rows(MAX_TOKENS_SHOWN)), np.asarray(cols(COLUMNS_SHOWN)),
                    (highlight_row,), tuple(highlight_cols), cols, signed, rows)

    def by_head_dims(step_key, title, formula, note, values) -> Step:
        return tokens_by(step_key, title, formula, note, values, dims(dh), "head dims", hd_cols)

    def by_keys(step_key, title, formula, note, values, signed=True) -> Step:
        return tokens_by(step_key, title, formula, note, values, labels, "keys", key_cols, (key,), signed,
                         row_axis="queries")

    source = (f"rows {head * dh}–{(head + 1) * dh - 1}" if w is not None else "the traced values (no weights in this trace)")
    kv_note = "" if w is None or w["kv_head"] == head else f" (grouped-query: key/value head {w['kv_head']})"
    steps = (
        tokens_by("x", "X: the normed input", "X = RMSNorm(h)   [T × D]",
                  "Each token's residual vector after RMSNorm: what attention reads.",
                  x, dims(cfg.hidden_size), "model dims", md_cols),
        by_head_dims("q", "Q: queries", f"Q = X · W_Qᵀ   [T × D]·[D × {dh}]",
                     f"W_Q for head {head} is {source} of q_proj.weight.", q),
        by_head_dims("k", "K: keys", f"K = X · W_Kᵀ   [T × D]·[D × {dh}]",
                     f"W_K is this head's slice of k_proj.weight{kv_note}.", k),
        by_head_dims("v", "V: values", f"V = X · W_Vᵀ   [T × D]·[D × {dh}]",
                     f"W_V is this head's slice of v_proj.weight{kv_note}.", v),
        by_head_dims("q_rot", "RoPE on Q", "q_rot[m] = q[m]·cos(mθ) + rotate_half(q[m])·sin(mθ)",
                     f"This model rotates q and k by their position m before the dot product "
                     f"(rotate-half pairing: dim i turns with dim i+{dh // 2}; θ_i = {cfg.rope_theta:g}^(−2i/{dh})). "
                     "The original Transformer (Vaswani et al., 2017) adds position vectors to X instead.", q_rot),
        by_head_dims("k_rot", "RoPE on K", "k_rot[n] = k[n]·cos(nθ) + rotate_half(k[n])·sin(nθ)",
                     "Keys are rotated the same way; V is not rotated.", k_rot),
        by_keys("qk", "Q·Kᵀ", "Q_rot · K_rotᵀ   [T × Dh]·[Dh × T]",
                "Every query's dot product with every key, future keys included (the mask comes later)", qk),
        by_keys("scaled", "÷ √Dh", f"S = Q_rot · K_rotᵀ / √{dh} = … / {np.sqrt(dh):.4g}",
                "Dividing by √Dh keeps the scores' spread independent of the head size (the original Transformer divides by √d_k too).",
                scaled),
        by_keys("masked", "+ causal mask", "S + M,   M[i, j] = −∞ where key j comes after query i",
                "A token may only look at itself and earlier tokens: future keys get −∞, i.e. weight 0 after softmax.",
                masked),
        by_keys("softmax", "softmax", "A = softmax(S + M) over each row",
                "Each row becomes attention weights that sum to 1.", probs, signed=False),
        tokens_by("weighted_v", "× V, for the selected query", f"a[{query}, j] · v[j]   for each key j",
                  f"Row {query} of A·V written out: each key's value scaled by its weight; the column sums "
                  f"are row {query} of the head's output.",
                  weighted_v, dims(dh), "head dims", hd_cols, rows=up_to_query,
                  row_axis="keys", highlight_row=key),
        by_head_dims("head_out", "The head's output",
                     "head_out = A · V" + ("" if head_mask == 1 else f" × {head_mask:g} (head mask)"),
                     "Each token's mix of the values it attends to."
                     + (" This head is ablated in this run." if head_mask == 0 else ""), head_out),
        tokens_by("concat", "Concatenation over heads", f"[head_0 | head_1 | … | head_{n_heads - 1}]   [T × {n_heads * dh}]",
                  f"All {n_heads} heads' outputs side by side (first dims of each head shown; head {head} is "
                  "the one computed above, the others are from the trace).",
                  concat, concat_labels, "concat dims", lambda n: concat_window(n_heads, dh, head, n),
                  range(head * dh, (head + 1) * dh)),
        tokens_by("attn_out", "× W_O", f"attn_out = concat · W_Oᵀ   [T × {n_heads * dh}]·[{n_heads * dh} × D]",
                  "The output projection mixes the heads back into the model's width.",
                  attn_out, dims(cfg.hidden_size), "model dims", md_cols),
        tokens_by("resid_mid", "+ residual", "resid_mid = h + attn_out",
                  "Attention's result is added to the layer's input h (the un-normed residual stream"
                  + (", here the token embeddings)." if layer == 0 else f" after layer {layer - 1})."),
                  resid_mid, dims(cfg.hidden_size), "model dims", md_cols),
    )
    return HeadCalculation(layer, head, query, key, steps,
                           dot_product(q_rot[query], k_rot[key], query, key, float(lt.scores[head, query, key])),
                           w is not None)


def dot_product(q: np.ndarray, k: np.ndarray, query: int, key: int, trace_score: float) -> DotProduct:
    terms = q.astype(np.float64) * k.astype(np.float64)
    total = float(terms.sum())
    scale = float(np.sqrt(q.shape[0]))
    return DotProduct(query, key, q, k, terms, total, scale, total / scale, trace_score)


def step_file_stem(index: int, step: Step) -> str:
    """step_01_x, step_02_q, …: the CSV names, in calculation order."""
    return f"step_{index + 1:02d}_{step.key}"
