"""Train a miniature Mixtral on a text corpus with PyTorch and write a Glassbox bundle.

    python main.py train --corpus resources/corpus --out resources/model --minutes 60

What happens:
1. the tokenizer is core's byte-level BPE trained on the training documents; the corpus is
   encoded once (documents joined with <|endoftext|>) and cached beside the checkpoints;
2. the first ``copy_warmup`` steps see only copy data: spans of random real tokens repeated until
   the window is full (induction heads form here, in ~1k steps at lr 1e-3). After that each batch
   is windows of real text, and a share of them (falling from ``copy_start`` to ``copy_end``) get a
   copy lesson written in: a span of random real tokens or of the text itself, then the same span
   again (sometimes after a gap). Natural text alone does not teach copying in a CPU-sized budget;
3. AdamW, linear warm-up then cosine decay, Switch-style load-balancing loss, gradient clipping;
4. periodic validation (loss on held-out text, loss on first/second copy of a repeated random
   sequence, best induction and previous-token head), checkpoints that ``--resume`` continues;
5. the bundle is written through core's exporter, evaluated with NumPy, and given a model card.

Batches come from ``np.random.default_rng([seed, step])``: a resumed run sees exactly the
batches an uninterrupted one would.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from core.config import ModelConfig
from core.model import weight_shapes
from core.tokenizer import BPETokenizer
from core.training.corpus import load_corpus
from core.training.evaluate import copy_losses, induction_score, previous_token_score, repeated_sequence
from core.training.torch_model import MixtralLM

CONFIGS = {
    # for tests: trains in seconds
    "tiny": ModelConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                        max_position_embeddings=128),
    # the shipped model. Tied embeddings: the LM head reads tokens in the same space the embedding
    # writes them, so "copy this earlier token" is an easy map for a head's OV circuit. With a
    # separate head no in-context copying appeared in 2,000 steps (see the model card).
    "default": ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=4, num_local_experts=4, num_experts_per_tok=2,
                           max_position_embeddings=256, tie_word_embeddings=True),
    "untied": ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, num_local_experts=4, num_experts_per_tok=2,
                          max_position_embeddings=256),
    "deep": ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_hidden_layers=3, tie_word_embeddings=True,
                        num_attention_heads=4, num_key_value_heads=4, num_local_experts=4, num_experts_per_tok=2,
                        max_position_embeddings=256),
}
# Settings a resumed run may change (recorded in the card); everything else comes from the checkpoint.
RESUME_OVERRIDES = ("copy_start", "copy_end", "lr", "steps")
DEFAULT_RUNS = Path(os.environ.get("GLASSBOX_RUNS", Path.home() / "glassbox-runs"))


@dataclass
class TrainSettings:
    corpus: str
    out: str
    config: str = "default"
    minutes: float | None = None     # time budget; sets the step count from the measured speed
    steps: int | None = None         # exact step count (reproducible schedule); wins over minutes
    seed: int = 0
    batch: int = 8
    seq_len: int = 128
    lr: float = 1e-3                 # 3e-3 never formed a copy circuit in the pilots; 1e-3 did
    min_lr_ratio: float = 0.1
    warmup: int = 200
    weight_decay: float = 0.1
    aux_coef: float = 0.01
    clip: float = 1.0
    copy_start: float = 0.6          # share of sequences with a copy lesson after the opening ...
    copy_end: float = 0.4            # ... and at the end (linear in between)
    copy_warmup: int = 2000          # opening steps on pure repeated random tokens (at most a fifth of the run)
    vocab_size: int | None = None    # default: the config's
    threads: int = 1
    run_dir: str | None = None
    eval_every: int = 250
    ckpt_every_s: float = 180.0
    resume: bool = False
    log_every_s: float = 10.0
    stop_at: int | None = None       # pause: checkpoint at this step and return without a bundle
    explicit: tuple = ()             # names the user gave (a resume only overrides those)

    def model_config(self) -> ModelConfig:
        cfg = CONFIGS[self.config]
        return replace(cfg, vocab_size=self.vocab_size) if self.vocab_size else cfg

    def run_path(self) -> Path:
        return Path(self.run_dir) if self.run_dir else DEFAULT_RUNS / Path(self.out).resolve().name


# ---------------------------------------------------------------- data

@dataclass
class Data:
    tokenizer: BPETokenizer
    train: np.ndarray        # [N] int32, documents joined with EOS
    val: np.ndarray          # [M] int32
    real_ids: np.ndarray     # ids seen in training text (what "random real tokens" draw from)
    manifest: dict
    n_train_docs: int
    n_val_docs: int


def _join(docs, tokenizer: BPETokenizer) -> np.ndarray:
    eos = tokenizer.eos_id
    out: list[int] = []
    for doc in docs:
        out.extend(tokenizer.encode(doc))
        out.append(eos)
    return np.asarray(out, np.int32)


def _check_tokenizer(tokenizer: BPETokenizer, docs, stream: np.ndarray) -> None:
    """Fail early if the tokenizer does not round-trip, or the cached ids are not what it gives now."""
    fresh = _join(docs, tokenizer)
    for doc in docs:
        if tokenizer.decode(tokenizer.encode(doc)) != doc:
            raise ValueError(f"the tokenizer does not round-trip {doc[:40]!r}; not training on it")
    if not np.array_equal(fresh, stream[:fresh.size]):
        raise ValueError("cached token ids differ from what the tokenizer gives now: delete the cache folder")


def prepare_data(corpus: str, vocab_size: int, cache_root: Path, log=print) -> Data:
    """Train (or reuse) the tokenizer and the encoded streams; cached by corpus content and vocab size."""
    train_docs, val_docs, manifest = load_corpus(corpus)
    if not train_docs:
        raise ValueError(f"{corpus}: no training text found")
    digest = hashlib.sha1(("\n\n".join(train_docs) + "\x00" + "\n\n".join(val_docs)).encode()).hexdigest()[:12]
    cache = cache_root / f"data-{digest}-v{vocab_size}"
    if (cache / "train.npy").is_file():
        tokenizer = BPETokenizer.load(cache / "tokenizer.json")
        train, val = np.load(cache / "train.npy"), np.load(cache / "val.npy")
    else:
        t0 = time.time()
        tokenizer = BPETokenizer.train(train_docs, vocab_size)
        log(f"tokenizer: {tokenizer.vocab_size} tokens trained in {time.time() - t0:.0f} s")
        train, val = _join(train_docs, tokenizer), _join(val_docs, tokenizer)
        log(f"encoded: {train.size:,} train / {val.size:,} val tokens in {time.time() - t0:.0f} s")
        cache.mkdir(parents=True, exist_ok=True)
        tokenizer.save(cache / "tokenizer.json")
        np.save(cache / "train.npy", train)
        np.save(cache / "val.npy", val)
    _check_tokenizer(tokenizer, train_docs[:200], train)
    counts = np.bincount(train, minlength=tokenizer.vocab_size)
    counts[tokenizer.eos_id] = 0
    return Data(tokenizer, train, val, np.nonzero(counts)[0], manifest, len(train_docs), len(val_docs))


def _window(stream: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    if stream.size > length:
        start = int(rng.integers(0, stream.size - length))
        return stream[start:start + length].astype(np.int64)
    return np.resize(stream, length).astype(np.int64)  # a tiny corpus: wrap around


def make_batch(data: Data, rng: np.random.Generator, batch: int, seq_len: int, copy_frac: float,
               pure_copy: bool = False):
    """x, y [B, T] (y is x shifted by one) and masks [B, T] of targets in a first / second copy.

    pure_copy: every row is a span of random real tokens repeated until the row is full, and
    nothing else (the opening curriculum: induction forms in ~1k steps of this, not in 2k+ of a mix)."""
    seqs = np.empty((batch, seq_len + 1), np.int64)
    first = np.zeros((batch, seq_len), bool)
    second = np.zeros((batch, seq_len), bool)
    for b in range(batch):
        if pure_copy:
            n = int(rng.integers(8, (seq_len + 1) // 2 + 1))
            seqs[b] = np.resize(rng.choice(data.real_ids, size=n), seq_len + 1)
            first[b, :n - 1] = True
            second[b, n:] = True
            continue
        seq = _window(data.train, seq_len + 1, rng)
        if rng.random() < copy_frac:
            # A span of length n at p, then again at p + n + gap: from the second copy on, every
            # token is predictable by "find this token earlier, read what followed" (induction).
            n = int(rng.integers(4, (seq_len + 1) // 2 + 1))
            gap = int(rng.integers(0, seq_len + 2 - 2 * n)) if rng.random() < 0.3 else 0
            p = int(rng.integers(0, seq_len + 2 - 2 * n - gap))
            if rng.random() < 0.6:
                span = rng.choice(data.real_ids, size=n)          # random real tokens: nothing but copying helps
            else:
                span = seq[p:p + n].copy()                        # real text repeated: copying in context
            seq[p:p + n] = span
            first[b, p:p + n - 1] = True                          # targets p+1 .. p+n-1 (index j-1)
            # Without a gap, half the time repeat the span until the window is full: more copy targets per step.
            copies = 1 if gap or rng.random() < 0.5 else max(1, (seq_len + 1 - p) // n - 1)
            for c in range(1, copies + 1):
                q = p + c * n + gap
                seq[q:q + n] = span
                second[b, q:q + n - 1] = True                     # targets q+1 .. q+n-1
        seqs[b] = seq
    return torch.from_numpy(seqs[:, :-1]), torch.from_numpy(seqs[:, 1:]), torch.from_numpy(first), torch.from_numpy(second)


# ---------------------------------------------------------------- schedule and optimiser

def opening_steps(s: TrainSettings, total: int | None) -> int:
    """Steps of pure copy data at the start: copy_warmup, but never more than a fifth of the run."""
    return s.copy_warmup if total is None else min(s.copy_warmup, total // 5)


def lr_at(step: int, total: int, s: TrainSettings) -> float:
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = min(1.0, (step - s.warmup) / max(1, total - s.warmup))
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: MixtralLM, s: TrainSettings) -> torch.optim.AdamW:
    # No weight decay on norms (gains at 1) and embeddings.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "embed_tokens" in name else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": s.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=s.lr, betas=(0.9, 0.95))


# ---------------------------------------------------------------- validation during training

@torch.no_grad()
def quick_eval(model: MixtralLM, data: Data, seed: int, seq_len: int, n_windows: int = 12, period: int = 32) -> dict:
    """Val CE on fixed windows; copy losses and head scores on fixed repeated random sequences."""
    model.eval()
    rng = np.random.default_rng([seed, 10**9])
    length = min(2 * seq_len, model.cfg.max_position_embeddings)
    windows = torch.from_numpy(np.stack([_window(data.val, length + 1, rng) for _ in range(n_windows)]))
    logits, _, load, _ = model(windows[:, :-1])
    val_ce = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
    reps = [repeated_sequence(data.real_ids, period, rng) for _ in range(8)]
    logits, _, _, attns = model(torch.from_numpy(np.stack(reps)), need_weights=True)
    c1, c2 = zip(*(copy_losses(logits[i].numpy(), reps[i], period) for i in range(len(reps))))
    ind = [induction_score(a.mean(0).numpy(), period) for a in attns]       # per layer [H]
    prev = [previous_token_score(a.mean(0).numpy()) for a in attns]
    model.train()
    return dict(val_ce=val_ce, copy1=float(np.mean(c1)), copy2=float(np.mean(c2)),
                induction=float(np.max(ind)), prev=float(np.max(prev)), load_min=float(load.min()))


# ---------------------------------------------------------------- checkpoints

def save_checkpoint(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


# ---------------------------------------------------------------- the loop

def _fmt_time(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def train(s: TrainSettings, log=print) -> Path:
    torch.set_num_threads(max(1, s.threads))
    run = s.run_path()
    run.mkdir(parents=True, exist_ok=True)
    ckpt_path = run / "checkpoint.pt"
    resume_state = None
    if s.resume:
        if not ckpt_path.is_file():
            raise ValueError(f"{ckpt_path}: no checkpoint to resume from")
        resume_state = torch.load(ckpt_path, weights_only=False)
        saved = resume_state["settings"]
        # The run's shape is fixed by the checkpoint; only where to write and how long may change.
        changed = {k: getattr(s, k) for k in RESUME_OVERRIDES if k in s.explicit and getattr(s, k) != saved[k]}
        s = TrainSettings(**{**saved, "out": s.out, "resume": True, "threads": s.threads, "stop_at": s.stop_at,
                             "minutes": s.minutes if s.minutes is not None else saved["minutes"], **changed})
        if changed:
            resume_state.setdefault("changes", []).append(dict(step=resume_state["step"], **changed))
            log(f"changed on resume at step {resume_state['step']}: {changed}")
        log(f"resuming {ckpt_path} at step {resume_state['step']}")

    cfg0 = s.model_config()
    data = prepare_data(s.corpus, cfg0.vocab_size, run.parent / "cache", log)  # shared by runs beside it
    cfg = replace(cfg0, vocab_size=data.tokenizer.vocab_size)  # a small corpus may give fewer merges
    torch.manual_seed(s.seed)
    model = MixtralLM(cfg)
    opt = make_optimizer(model, s)
    step, tokens, elapsed, history, changes = 0, 0, 0.0, [], []
    total = s.steps
    if resume_state:
        model.load_state_dict(resume_state["model"])
        opt.load_state_dict(resume_state["optimizer"])
        step, tokens, elapsed = resume_state["step"], resume_state["tokens"], resume_state["elapsed"]
        history, total = resume_state["history"], resume_state["total_steps"]
        changes = resume_state.get("changes", [])
        if "steps" in (changes[-1] if changes else {}) and changes[-1]["step"] == step:
            total = s.steps
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params:,} parameters, {cfg.num_hidden_layers} layers, vocab {cfg.vocab_size}; "
        f"{data.train.size:,} training tokens; run folder {run}")

    def checkpoint() -> None:
        save_checkpoint(ckpt_path, dict(model=model.state_dict(), optimizer=opt.state_dict(), step=step,
                                        tokens=tokens, elapsed=elapsed, history=history, total_steps=total,
                                        settings=asdict(s), config=cfg.to_dict(), changes=changes))

    start = time.time() - elapsed
    last_log = last_ckpt = time.time()
    ema = None
    model.train()
    while total is None or step < total:
        frac = step / total if total else 0.0
        copy_frac = s.copy_start + (s.copy_end - s.copy_start) * frac
        x, y, m1, m2 = make_batch(data, np.random.default_rng([s.seed, step]), s.batch, s.seq_len, copy_frac,
                                  pure_copy=step < opening_steps(s, total))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, total or 10**9, s)
        logits, aux, load, _ = model(x)
        ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view_as(y)  # [B, T]
        loss = ce.mean() + s.aux_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.clip)
        opt.step()
        step += 1
        tokens += x.numel()
        elapsed = time.time() - start
        with torch.no_grad():
            cur = dict(loss=ce.mean().item(), c1=ce[m1].mean().item() if m1.any() else float("nan"),
                       c2=ce[m2].mean().item() if m2.any() else float("nan"))
        ema = cur if ema is None else {k: (0.95 * ema[k] + 0.05 * v if v == v else ema[k]) if ema[k] == ema[k] else v
                                       for k, v in cur.items()}

        if total is None and step == 30:  # a time budget: fix the schedule from the measured speed
            total = max(step + 1, int(s.minutes * 60 / (elapsed / step)))
            log(f"{elapsed / step:.2f} s/step -> {total} steps in {s.minutes:g} minutes")
        if s.minutes is not None and elapsed > s.minutes * 60 and total is not None and step < total:
            log(f"time budget reached at step {step} of {total}")
            total = step
        if step % s.eval_every == 0 or step == total:
            q = quick_eval(model, data, s.seed, s.seq_len)
            history.append(dict(step=step, tokens=tokens, minutes=elapsed / 60, train_loss=ema["loss"], **q))
            log(f"  eval step {step}: val {q['val_ce']:.3f} | copy 1st {q['copy1']:.2f} 2nd {q['copy2']:.2f} | "
                f"induction {q['induction']:.2f} prev {q['prev']:.2f} | min expert load {q['load_min']:.2f}")
        now = time.time()
        if now - last_log >= s.log_every_s or step == total:
            rate = tokens / max(elapsed, 1e-9)
            eta = (total - step) * elapsed / step if total else float("nan")
            log(f"step {step}/{total or '?'} | {rate:,.0f} tok/s | loss {ema['loss']:.3f} | copy 1st {ema['c1']:.2f} "
                f"2nd {ema['c2']:.2f} | lr {opt.param_groups[0]['lr']:.2e} | load {load.min().item():.2f} | "
                f"{_fmt_time(elapsed)} elapsed, ETA {_fmt_time(eta) if eta == eta else '?'}")
            last_log = now
        if now - last_ckpt >= s.ckpt_every_s:
            checkpoint()
            last_ckpt = now
        if s.stop_at is not None and step >= s.stop_at and step < (total or 0):
            checkpoint()
            log(f"paused at step {step}; continue with --resume")
            return ckpt_path
    checkpoint()
    log(f"trained {step} steps, {tokens:,} tokens in {_fmt_time(elapsed)}; writing the bundle")
    return finish(model, data, s, dict(step=step, tokens=tokens, elapsed=elapsed, history=history, changes=changes), log)


# ---------------------------------------------------------------- the bundle and its card

def reproduce_command(s: TrainSettings, steps: int) -> str:
    defaults = TrainSettings(corpus="", out="")
    args = ["python", "main.py", "train", "--corpus", s.corpus, "--out", s.out, "--config", s.config,
            "--steps", str(steps), "--seed", str(s.seed)]
    for name in ("batch", "seq_len", "lr", "warmup", "weight_decay", "aux_coef", "copy_start", "copy_end", "copy_warmup",
                 "vocab_size", "min_lr_ratio"):
        value = getattr(s, name)
        if value != getattr(defaults, name):
            args += [f"--{name.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(a) for a in args)


def finish(model: MixtralLM, data: Data, s: TrainSettings, run: dict, log=print) -> Path:
    from core.atomic import atomic_write_bytes
    from core.bundle import CARD_FILE, load_bundle, write_bundle
    from core.training.evaluate import evaluate_bundle, format_report, to_json

    out = Path(s.out)
    cfg = model.cfg
    write_bundle(out, cfg, model.numpy_weights(), data.tokenizer, "# (evaluating...)\n")
    bundle = load_bundle(out)
    train_docs, val_docs, _ = load_corpus(s.corpus)
    result = evaluate_bundle(bundle, val_docs, train_docs, backend="onnx")
    (s.run_path() / "eval.json").write_text(to_json(result), encoding="utf-8")
    card = model_card(cfg, data, s, run, result, format_report(result))
    atomic_write_bytes(out / CARD_FILE, card.encode("utf-8"))
    log(format_report(result))
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    log(f"bundle: {out} ({size / 1e6:.1f} MB)")
    return out


def _curve_table(history: list[dict], rows: int = 14) -> str:
    if not history:
        return "(no validation points)"
    pick = sorted({round(i * (len(history) - 1) / (rows - 1)) for i in range(rows)}) if len(history) > rows else range(len(history))
    lines = ["| step | tokens | minutes | train loss | val loss | copy loss 1st / 2nd | best induction | best prev-token | min expert load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i in pick:
        h = history[i]
        lines.append(f"| {h['step']} | {h['tokens'] / 1e6:.2f} M | {h['minutes']:.1f} | {h['train_loss']:.3f} | "
                     f"{h['val_ce']:.3f} | {h['copy1']:.2f} / {h['copy2']:.2f} | {h['induction']:.2f} | "
                     f"{h['prev']:.2f} | {h['load_min']:.2f} |")
    return "\n".join(lines)


def _sources_table(manifest: dict) -> str:
    sources = manifest.get("sources", [])
    lines = ["| Debian package | version | language | licence (from its copyright file) | documents | characters |",
             "|---|---|---|---|---|---|"]
    for src in sources:
        lines.append(f"| {src.get('package')} | {src.get('version', '')} | {src.get('language', '')} | "
                     f"{src.get('licence', '')} | {src.get('kept_documents', '')} | {src.get('characters', '')} |")
    return "\n".join(lines)


def model_card(cfg: ModelConfig, data: Data, s: TrainSettings, run: dict, result: dict, report: str) -> str:
    samples = "\n".join(f"- `{prompt}` → {json.dumps(text, ensure_ascii=False)}" for prompt, text in result["samples"].items())
    sampled = "\n".join(f"- `{prompt}` → {json.dumps(text, ensure_ascii=False)}"
                        for prompt, text in result.get("sampled", {}).items())
    params = sum(int(np.prod(shape)) for shape in weight_shapes(cfg).values())
    final = run["history"][-1] if run["history"] else {}
    return f"""# Glassbox mini-Mixtral ({s.config})

A {cfg.num_hidden_layers}-layer miniature Mixtral ({params:,} parameters: d_model {cfg.hidden_size},
{cfg.num_attention_heads} heads, {cfg.num_local_experts} SwiGLU experts top-{cfg.num_experts_per_tok},
vocabulary {cfg.vocab_size}, context {cfg.max_position_embeddings}) trained from scratch by this project's own
code (core/training/) on English and Chinese text from Debian packages, on a 2-core CPU.
It is a teaching model: small enough to look inside, trained long enough that its heads and experts do
recognisable things. It is not a useful text generator.

## Corpus

Built by `python main.py corpus --out {s.corpus}` (see resources/corpus/README.md): packages fetched with
`apt-get download`, unpacked with `dpkg-deb -x`, cleaned, deduplicated, split train/validation by a hash of
each document. {data.n_train_docs:,} training documents ({data.train.size:,} tokens), {data.n_val_docs:,}
validation documents ({data.val.size:,} tokens).

{_sources_table(data.manifest)}

Training also uses sequences the trainer writes itself, which teach in-context copying (induction heads):
the first {opening_steps(s, run['step']):,} steps see only spans of random real tokens repeated until the window is full;
after that a span of random real tokens (or of the text itself) followed by the same span again is written
into {s.copy_start:.0%} of the text windows at the start, falling to {s.copy_end:.0%} at the end.

## Training

- tokenizer: core's byte-level BPE, {data.tokenizer.vocab_size} tokens, trained on the training documents
- {run['step']:,} steps of batch {s.batch} × {s.seq_len} tokens = {run['tokens']:,} tokens seen, in {run['elapsed'] / 60:.0f} minutes
  on {s.threads} CPU thread(s)
- AdamW (β 0.9/0.95, weight decay {s.weight_decay} on matrices), peak learning rate {s.lr:g}, {s.warmup} warm-up
  steps, cosine decay to {s.min_lr_ratio:g}× peak; gradient clipping {s.clip}; load-balancing loss × {s.aux_coef};
  seed {s.seed}
- final validation loss {final.get('val_ce', float('nan')):.3f} nats/token

### Curve

{_curve_table(run['history'])}

(val loss: held-out text windows of {min(2 * s.seq_len, cfg.max_position_embeddings)} tokens; copy losses and head
scores on repeated random sequences of 32 tokens, measured in training.)

## Evaluation

`python main.py eval {s.out} --corpus {s.corpus}` (NumPy/ONNX runners on this bundle):

{report}

## Samples

Greedy (the most likely token each time; small models fall into loops, and the induction heads make
repeating what is already in the context especially likely):

{samples}

Sampled (temperature 0.8, top-40, seed {s.seed}):

{sampled}

## Reproduce

    python main.py corpus --out {s.corpus}
    {reproduce_command(s, run['step'])}

The same corpus, seed and step count give the same batches; floating-point results may differ slightly
between machines and thread counts.
"""


def settings_from_args(args) -> TrainSettings:
    fields = TrainSettings.__dataclass_fields__
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    return TrainSettings(**given, explicit=tuple(given))
