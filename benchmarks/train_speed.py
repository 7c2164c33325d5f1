"""Training throughput of the PyTorch model on this machine: threads, batch shape, sparse experts.

    python benchmarks/train_speed.py [--steps 20] [--config default]

Prints tokens/s per setting (random tokens; the data does not change the speed). On a 2-core machine
shared with other work one thread has been faster than two: threads wait for each other.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.training.torch_model import MixtralLM  # noqa: E402
from core.training.trainer import CONFIGS  # noqa: E402


def tokens_per_second(config: str, threads: int, batch: int, seq_len: int, steps: int) -> float:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = CONFIGS[config]
    model = MixtralLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1))
    for step in range(steps + 3):
        if step == 3:  # the first steps warm up allocators and kernels
            start = time.perf_counter()
        logits, aux, _, _ = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
    return steps * batch * seq_len / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--config", default="default")
    args = parser.parse_args()
    for threads in (1, 2):
        for batch, seq_len in ((8, 128), (16, 64), (16, 128), (8, 256)):
            rate = tokens_per_second(args.config, threads, batch, seq_len, args.steps)
            print(f"threads {threads}  batch {batch:3d} x {seq_len:3d}  {rate:8,.0f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
