"""The README's gallery, made by the command line itself: `main.py export` on the shipped model.

    python docs/make_gallery.py [--out docs/gallery] [--model BUNDLE]

Runs the CLI (a subprocess, exactly as a user would) for an English and a Chinese sentence and
copies the PNGs it wrote into docs/gallery/, 900 pixels wide, so the README shows exactly what a
user gets. Nothing is drawn here.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 900    # PNG pixels: readable in a README, small in the repository
# (sentence, selection options, figures): each run writes its figures under their own names
RUNS = (
    ("The cat sat on the mat. The cat sat on the", ["--layer", "1", "--head", "2"],
     ["attention_head", "attention_grid", "attention_lines", "next_token_bars", "moe_router_probs",
      "moe_expert_load", "step_by_step", "step_10_softmax", "positions_rope_pairs", "positions_rope_angles",
      "positions_relative", "logit_lens_heatmap", "occlusion_strip"]),
    ("The cat sat. 订单成交。", [], ["tokens_merges", "tokens_chips"]),
)


def export(text: str, options: list[str], figures: list[str], out: Path, model: str | None) -> None:
    command = [sys.executable, str(ROOT / "main.py"), "export", "--text", text, "--out", str(out),
               "--formats", "png", "--width", str(WIDTH), "--figures", ",".join(figures), *options]
    if model:
        command += ["--model", model]
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    subprocess.run(command, check=True, env=env, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "gallery"))
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for text, options, figures in RUNS:
        with tempfile.TemporaryDirectory() as scratch:
            written = Path(scratch) / "figures"
            export(text, options, figures, written, args.model)
            for name in figures:
                shutil.copyfile(written / f"{name}.png", out / f"{name}.png")
                print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
