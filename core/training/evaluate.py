"""Evaluate a bundle with NumPy only: loss, head scores, copying, expert load and specialisation.

Every metric is a small function of arrays from a Trace (attention [H, T, T], logits [T, V],
expert_ids [T, k]) so it can be checked on hand-made inputs. ``evaluate_bundle`` runs a
bundle through one of core's runners and gathers them all; the model card prints the result.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from typing import Sequence

import numpy as np

# ---------------------------------------------------------------- attention patterns

def previous_token_score(attn: np.ndarray) -> np.ndarray:  # [H, T, T] -> [H]
    """Mean attention from position i to i-1 (i >= 1): 1.0 for a head that only looks one back."""
    t = attn.shape[-1]
    i = np.arange(1, t)
    return attn[:, i, i - 1].mean(axis=-1)


def sink_score(attn: np.ndarray) -> np.ndarray:  # [H, T, T] -> [H]
    """Mean attention to the first token from positions i >= 1 (position 0 has no other choice)."""
    return attn[:, 1:, 0].mean(axis=-1)


def induction_score(attn: np.ndarray, period: int) -> np.ndarray:  # [H, 2P, 2P] -> [H]
    """On a sequence repeated twice (period P, no token repeated within a period): mean attention
    from each position i of the second copy to i - P + 1, the token after this token's first occurrence."""
    t = attn.shape[-1]
    i = np.arange(period, t)
    return attn[:, i, i - period + 1].mean(axis=-1)


def token_losses(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:  # [T, V], [T] -> [T-1]
    """Cross-entropy (nats) of predicting ids[j] from position j-1, for j = 1..T-1."""
    x = logits[:-1].astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    logz = np.log(np.exp(x).sum(axis=-1))
    return logz - x[np.arange(len(ids) - 1), ids[1:]]


def copy_losses(logits: np.ndarray, ids: np.ndarray, period: int) -> tuple[float, float]:
    """(mean loss on the first copy, on the second copy) of a sequence repeated twice.
    The first token of each copy is left out: nothing before it predicts it."""
    losses = token_losses(logits, ids)          # losses[j-1] is the loss of token j
    first = losses[0: period - 1]               # tokens 1..P-1
    second = losses[period: 2 * period - 1]     # tokens P+1..2P-1
    return float(first.mean()), float(second.mean())


def repeated_sequence(vocab: Sequence[int], period: int, rng: np.random.Generator) -> np.ndarray:  # -> [2P]
    """period distinct real tokens drawn at random, then the same tokens again."""
    span = rng.choice(np.asarray(vocab), size=period, replace=False)
    return np.concatenate([span, span]).astype(np.int64)


PROBE_PERIOD, PROBE_REPEATS, PROBE_SEED = 64, 8, 0


def probe_period(max_positions: int, chunk_len: int = 256, period: int = PROBE_PERIOD) -> int:
    """The span length eval repeats: `period`, shortened so that both copies fit a window of the context."""
    return min(period, min(chunk_len, max_positions) // 2)


def induction_probes(tokenizer, vocab_size: int, period: int, n_repeats: int = PROBE_REPEATS,
                     seed: int = PROBE_SEED) -> list[np.ndarray]:  # -> n_repeats x [2P]
    """The fixed probe of a bundle: n_repeats repeated random sequences of real (non-special) tokens,
    drawn in order from default_rng(seed); eval's induction and copying numbers and the head-role
    readout both score these same sequences. Real means the tokenizer has the id: an embedding can
    have padding rows past the tokenizer's vocabulary (Qwen2's 151,936 rows for 151,665 tokens)."""
    rng = np.random.default_rng(seed)
    special = set(tokenizer.special_tokens.values())
    real = [i for i in range(min(vocab_size, tokenizer.vocab_size)) if i not in special]
    return [repeated_sequence(real, period, rng) for _ in range(n_repeats)]


# ---------------------------------------------------------------- experts

def expert_load(expert_ids: np.ndarray, n_experts: int) -> np.ndarray:  # [N, k] -> [E]
    """Share of all top-k assignments that went to each expert (sums to 1)."""
    counts = np.bincount(expert_ids.reshape(-1), minlength=n_experts).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def token_script(piece_bytes: bytes) -> str:
    """'zh' for a token holding CJK text (or only UTF-8 multibyte fragments), 'latin' for ASCII letters, else 'other'."""
    text = piece_bytes.decode("utf-8", errors="ignore")
    if any("\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" for c in text):
        return "zh"
    if piece_bytes and not text and all(b >= 0x80 for b in piece_bytes):
        return "zh"  # a byte fragment of a multibyte character; in this corpus almost always Chinese
    if any(c.isascii() and c.isalpha() for c in text):
        return "latin"
    return "other"


def expert_scripts(expert_ids: np.ndarray, scripts: Sequence[str], n_experts: int) -> list[dict[str, float]]:
    """Per expert: share of the tokens routed to it (any slot) that are zh / latin / other."""
    out = []
    for e in range(n_experts):
        rows = np.nonzero((expert_ids == e).any(axis=-1))[0]
        c = Counter(scripts[r] for r in rows)
        n = max(len(rows), 1)
        out.append({s: c.get(s, 0) / n for s in ("zh", "latin", "other")})
    return out


# ---------------------------------------------------------------- unigram baseline

def unigram_cross_entropy(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int) -> float:
    """Cross-entropy (nats/token) of val under the train unigram distribution (add-0.5 smoothing)."""
    counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64) + 0.5
    logp = np.log(counts / counts.sum())
    return float(-logp[val_ids].mean())


# ---------------------------------------------------------------- the whole bundle

def _chunks(docs: Sequence[str], tokenizer, length: int, max_chunks: int) -> list[np.ndarray]:
    """Text as token windows of `length` (documents joined with EOS), at most max_chunks of them
    spread evenly over the whole stream, so every source is represented, not just the first documents."""
    eos = tokenizer.eos_id
    stream: list[int] = []
    for doc in docs:
        stream.extend(tokenizer.encode(doc))
        if eos is not None:
            stream.append(eos)
    available = len(stream) // length
    if available == 0:
        return [np.asarray(stream, np.int64)] if len(stream) > 1 else []
    picks = np.unique(np.linspace(0, available - 1, min(max_chunks, available)).round().astype(int))
    return [np.asarray(stream[i * length:(i + 1) * length], np.int64) for i in picks]


def greedy_continue(runner, tokenizer, prompt: str, n_tokens: int) -> str:
    ids = tokenizer.encode(prompt)
    limit = runner.bundle.config.max_position_embeddings
    for _ in range(n_tokens):
        if len(ids) >= limit:
            break
        nxt = int(np.argmax(runner.run(ids).logits[-1]))
        if nxt == tokenizer.eos_id:
            break
        ids.append(nxt)
    return tokenizer.decode(ids)


def sampled_continue(runner, tokenizer, prompt: str, n_tokens: int, rng: np.random.Generator,
                     temperature: float = 0.8, top_k: int = 40) -> str:
    """Sampling from the top-k at a temperature: shows the model's language without greedy's loops."""
    ids = tokenizer.encode(prompt)
    limit = runner.bundle.config.max_position_embeddings
    for _ in range(n_tokens):
        if len(ids) >= limit:
            break
        logits = runner.run(ids).logits[-1].astype(np.float64) / temperature
        top = np.argsort(-logits)[:top_k]
        p = np.exp(logits[top] - logits[top].max())
        nxt = int(rng.choice(top, p=p / p.sum()))
        if nxt == tokenizer.eos_id:
            break
        ids.append(nxt)
    return tokenizer.decode(ids)


SAMPLE_PROMPTS = ("The man said that", "In the beginning", "A friend is", "Love is",
                  "今天天气", "子曰：", "点击", "山中")


def evaluate_bundle(bundle, val_docs: Sequence[str], train_docs: Sequence[str] = (), *, backend: str = "numpy",
                    n_chunks: int = 96, chunk_len: int = 256, period: int = PROBE_PERIOD, n_repeats: int = PROBE_REPEATS,
                    prompts: Sequence[str] = SAMPLE_PROMPTS, sample_tokens: int = 30, seed: int = 0) -> dict:
    """All the numbers the card prints; plain Python types, so the result is JSON."""
    from core.runners import make_runner

    runner = make_runner(bundle, backend)
    cfg, tok = bundle.config, bundle.tokenizer
    L, H, E = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts
    period = probe_period(cfg.max_position_embeddings, chunk_len, period)
    chunk_len = min(chunk_len, cfg.max_position_embeddings)

    # Natural validation text: loss, previous-token and sink scores, expert load and scripts.
    losses, prev, sink = [], np.zeros((L, H)), np.zeros((L, H))
    ids_by_layer: list[list[np.ndarray]] = [[] for _ in range(L)]
    scripts: list[str] = []
    chunks = _chunks(val_docs, tok, chunk_len, n_chunks)
    for ids in chunks:
        trace = runner.run(ids)
        losses.append(token_losses(trace.logits, ids))
        for l, layer in enumerate(trace.layers):
            prev[l] += previous_token_score(layer.attn) / len(chunks)
            sink[l] += sink_score(layer.attn) / len(chunks)
            ids_by_layer[l].append(layer.expert_ids)
        scripts.extend(token_script(tok.piece_bytes(tok.id_to_piece(int(i)))) for i in ids)
    val_ids = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    val_ce = float(np.concatenate(losses).mean()) if losses else float("nan")

    unigram = None
    if train_docs:
        train_ids = np.concatenate(_chunks(train_docs[:4000], tok, 1024, 1000) or [np.zeros(1, np.int64)])
        unigram = unigram_cross_entropy(train_ids, val_ids, cfg.vocab_size)

    # Repeated random sequences of real tokens: induction heads and in-context copying.
    induction, first, second = np.zeros((L, H)), [], []
    for ids in induction_probes(tok, cfg.vocab_size, period, n_repeats, seed):
        trace = runner.run(ids)
        for l, layer in enumerate(trace.layers):
            induction[l] += induction_score(layer.attn, period) / n_repeats
        a, b = copy_losses(trace.logits, ids, period)
        first.append(a)
        second.append(b)

    load = [expert_load(np.concatenate(ids_by_layer[l]), E).tolist() for l in range(L)]
    spec = [expert_scripts(np.concatenate(ids_by_layer[l]), scripts, E) for l in range(L)]
    overall = Counter(scripts)
    samples = {p: greedy_continue(runner, tok, p, sample_tokens) for p in prompts}
    sample_rng = np.random.default_rng(seed)
    sampled = {p: sampled_continue(runner, tok, p, sample_tokens, sample_rng) for p in prompts}
    return dict(
        backend=backend, val_tokens=int(val_ids.size), val_ce=val_ce, val_ppl=math.exp(val_ce) if val_ce == val_ce else None,
        unigram_ce=unigram, previous_token=prev.tolist(), sink=sink.tolist(), induction=induction.tolist(),
        induction_period=period, copy_loss_first=float(np.mean(first)), copy_loss_second=float(np.mean(second)),
        expert_load=load, expert_scripts=spec,
        val_script_share={s: overall.get(s, 0) / max(len(scripts), 1) for s in ("zh", "latin", "other")},
        samples=samples, sampled=sampled)


def thresholds(result: dict) -> dict[str, bool]:
    """What a usefully trained model of the shipped size reaches: the bars the shipped model was trained to pass."""
    return {
        "induction head >= 0.4": max(max(r) for r in result["induction"]) >= 0.4,
        "previous-token head >= 0.6": max(max(r) for r in result["previous_token"]) >= 0.6,
        "2nd-copy loss well below 1st (< half)": result["copy_loss_second"] < 0.5 * result["copy_loss_first"],
        "every expert >= 5% of assignments": min(min(r) for r in result["expert_load"]) >= 0.05,
    }


def format_report(result: dict) -> str:
    """Markdown tables of an evaluation result (used by the CLI and the model card)."""
    lines = []
    ce, uni = result["val_ce"], result["unigram_ce"]
    lines.append(f"- validation cross-entropy: **{ce:.3f} nats/token** (perplexity {math.exp(ce):.1f}) "
                 f"on {result['val_tokens']} tokens" + (f"; unigram baseline {uni:.3f}" if uni else ""))
    lines.append(f"- repeated random sequence ({result['induction_period']} real tokens, twice): loss on the first copy "
                 f"**{result['copy_loss_first']:.3f}**, on the second copy **{result['copy_loss_second']:.3f}**")
    lines.append("")
    lines.append("| layer.head | previous-token | induction | first-token (sink) |")
    lines.append("|---|---|---|---|")
    for l, (p, i, s) in enumerate(zip(result["previous_token"], result["induction"], result["sink"])):
        for h in range(len(p)):
            lines.append(f"| {l}.{h} | {p[h]:.3f} | {i[h]:.3f} | {s[h]:.3f} |")
    lines.append("")
    lines.append("| layer.expert | share of top-k assignments | zh / latin / other tokens |")
    lines.append("|---|---|---|")
    for l, (load, spec) in enumerate(zip(result["expert_load"], result["expert_scripts"])):
        for e in range(len(load)):
            s = spec[e]
            lines.append(f"| {l}.{e} | {load[e]:.1%} | {s['zh']:.0%} / {s['latin']:.0%} / {s['other']:.0%} |")
    share = result["val_script_share"]
    lines.append(f"\n(validation tokens overall: {share['zh']:.0%} zh / {share['latin']:.0%} latin / {share['other']:.0%} other)")
    lines.append("")
    lines.append("Checks (what a usefully trained model reaches): " + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in thresholds(result).items()))
    return "\n".join(lines)


def to_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False)
