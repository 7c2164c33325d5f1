"""Import and run random-weight models of real shapes (no download, no transformers): time and memory.

    python benchmarks/bench_import.py [--shapes smollm2-135m,qwen2.5-0.5b] [--json] [--repeats 5]

For each shape it writes a Hugging Face folder (config.json, a bfloat16 model.safetensors written
directly, a byte-level tokenizer.json with exactly vocab_size tokens), imports it with
`main.py import`, then measures in fresh processes, so each peak RSS is its own:
  import_s, import_rss_mb          the import
  load_s                           load_bundle (the gate, with its dry run through both runners)
  forward_onnx_ms.64, rss_mb.64    ONNX forward with the full trace at 64 tokens (median): what the
                                   app's panels read today
  forward_onnx_ms.64_panels        ONNX forward at 64 tokens keeping what the default layout's panels
                                   ask for: the selected layer's attn and scores, every layer's
                                   thumbnails and tops (core.attention_summary), the last logits
  forward_onnx_ms.1024_panels,     the same at 1024 tokens (past Bundle.context, which is sized for
  rss_mb.1024_panels               a full trace: a partial run may go further)
  forward_numpy_ms.64              the NumPy reference at 64 tokens, full trace (median)
  update_ms.64, rss_mb.update_64   the app (ONNX backend, default layout, offscreen): a 64-token
                                   sentence set -> every visible panel repainted (bench_gui's rule);
                                   a big model's run keeps what the visible panels declare (Panel.fields)
  update_ms.64_full_trace          the same with the whole trace kept (what the app did before)
Load average (1 minute) at the start and the end of each shape is in the result: timings on a
shared machine mean little without it.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # before NumPy loads, as main.py does for the app (threaded BLAS stalls when shared)

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.attention_view import attention_fields  # noqa: E402

SHAPES = {
    "smollm2-135m": dict(architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=30, hidden_size=576,
                         num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
                         tie_word_embeddings=True, rope_theta=100000.0, rms_norm_eps=1e-5,
                         max_position_embeddings=8192, hidden_act="silu", attention_bias=False, mlp_bias=False),
    "qwen2.5-0.5b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", num_hidden_layers=24, hidden_size=896,
                         num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
                         tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         max_position_embeddings=32768, hidden_act="silu", use_sliding_window=False,
                         sliding_window=32768),
}
PANEL_FIELDS = [*attention_fields(0), "logits.last"]   # Tokens, Attention (layer 0 selected), Next token


def write_safetensors_bf16(path: Path, shapes: dict[str, tuple[int, ...]], seed: int) -> None:
    """A bfloat16 safetensors file written tensor by tensor (the format: u64 header size, JSON, bytes)."""
    import ml_dtypes

    header, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    rng = np.random.default_rng(seed)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                values = np.ones(shape, np.float32)
            else:
                values = rng.standard_normal(shape, dtype=np.float32) * np.float32(1 / np.sqrt(shape[-1]))
            f.write(values.astype(ml_dtypes.bfloat16).tobytes())


def write_tokenizer(path: Path, vocab_size: int) -> None:
    """A valid byte-level BPE tokenizer.json with exactly vocab_size tokens: the project's trained
    tokenizer, grown by merges of existing pieces (the ids matter here, not the quality)."""
    from core.sample_text import sample_sentences
    from core.tokenizer import BPETokenizer

    tokenizer = BPETokenizer.train(sample_sentences(300, seed=1), vocab_size=512, min_frequency=1)
    tokenizer.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    special = data.get("added_tokens", [])
    pieces = sorted((p for p in vocab if not any(p == t["content"] for t in special)), key=vocab.get)
    next_id = max(vocab.values()) + 1
    base = pieces[:256]
    for left in pieces:
        for right in base:
            if len(vocab) >= vocab_size:
                break
            if left + right not in vocab:
                vocab[left + right] = next_id
                merges.append([left, right])
                pieces.append(left + right)
                next_id += 1
        if len(vocab) >= vocab_size:
            break
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def make_hf_folder(folder: Path, shape: str) -> None:
    from core.config import ModelConfig
    from core.model import weight_shapes

    folder.mkdir(parents=True, exist_ok=True)
    config = SHAPES[shape]
    (folder / "config.json").write_text(json.dumps({**config, "_name_or_path": f"random/{shape}"}, indent=2))
    write_safetensors_bf16(folder / "model.safetensors", weight_shapes(ModelConfig.from_dict(config)), seed=0)
    write_tokenizer(folder / "tokenizer.json", config["vocab_size"])


def child_measure(bundle: str, mode: str, repeats: int) -> dict:
    """Runs in a fresh process: load, run, report times and this process's peak RSS."""
    from core.bundle import load_bundle
    from core.runners import NumpyRunner, OnnxRunner

    start = time.perf_counter()
    loaded = load_bundle(bundle)
    load_s = time.perf_counter() - start
    vocab = loaded.config.vocab_size
    ids = np.random.default_rng(0).integers(0, min(vocab, 500), 1024 if mode == "onnx-1024" else 64)
    runner = NumpyRunner(loaded) if mode == "numpy-64" else OnnxRunner(loaded)
    fields = PANEL_FIELDS if mode in ("onnx-1024", "onnx-64-panels") else None
    runner.run(ids, fields=fields)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        runner.run(ids, fields=fields)
        times.append(time.perf_counter() - start)
    return dict(ms=1e3 * statistics.median(times), load_s=load_s, rss_mb=peak_rss_mb())


def child_update(bundle: str, repeats: int, full_trace: bool) -> dict:
    """Runs in a fresh process: the app's update at 64 tokens on this bundle, as bench_gui measures it
    (full_trace: every run keeps the whole trace, whatever the panels on screen declare)."""
    from benchmarks.bench_gui import PaintLog, WINDOW_SIZE, _offscreen, _quiet_qt_warnings

    _offscreen()
    _quiet_qt_warnings()
    from PySide6.QtCore import QSettings

    from core.bench import text_of_tokens
    from core.bundle import load_bundle
    from gui.app import application
    from gui.controller import Controller
    from gui.main_window import MainWindow

    app = application()
    controller = Controller(load_bundle(bundle), "onnx")
    if full_trace:
        controller.partial_trace_bytes = sys.maxsize
    arrived: list[float] = []
    controller.sigTraceChanged.connect(lambda trace: arrived.append(time.perf_counter()))
    with tempfile.TemporaryDirectory() as folder:
        window = MainWindow(controller, QSettings(str(Path(folder) / "bench.ini"), QSettings.Format.IniFormat))
        window.resize(*WINDOW_SIZE)
        window.show()
        log = PaintLog(app)
        visible = {p.object_name for p in window.panels if window.on_screen(p)}
        times = []
        for run in range(repeats + 1):  # the first run builds the session and warms caches: not counted
            text = text_of_tokens(controller.bundle.tokenizer, 64, shift=run)
            start = time.perf_counter()
            window.sentence_bar.setText(text)
            controller.flush()
            end = painted_after_trace(app, log, arrived, lambda: controller.trace is not None
                                      and controller.trace.text == text and not controller.busy(), visible)
            if run:
                times.append(end - start)
        print(json.dumps(dict(ms=1e3 * statistics.median(times), rss_mb=peak_rss_mb())), flush=True)
    os._exit(0)  # tearing Qt down is not part of the number


def painted_after_trace(app, log, arrived: list[float], ready, panels: set[str], timeout: float = 600.0) -> float:
    """Deliver events until the trace is shown and every panel named has painted after it arrived, then
    paints stop for bench_gui.QUIET_S; the time of the last of those paints. (A panel's paint from
    before the trace arrived, e.g. of the busy state, does not count: a slow run would hide behind it.)"""
    from benchmarks.bench_gui import QUIET_S

    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        app.processEvents()
        if ready() and arrived:
            painted = {name: when for name, (when, _cpu) in log.since(arrived[-1]).items()}
            if panels <= painted.keys() and time.perf_counter() - max(painted.values()) >= QUIET_S:
                return max(painted.values())
        time.sleep(0.0005)
    raise TimeoutError("the panels did not repaint the new trace in time")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_shape(shape: str, tmp: Path, repeats: int) -> dict:
    source, bundle = tmp / f"{shape}-hf", tmp / f"{shape}-bundle"
    load_start = os.getloadavg()[0]
    make_hf_folder(source, shape)
    imported = run_child(["--child-import", str(source), str(bundle)])
    result = {"shape": shape, "import_s": round(imported["s"], 2), "import_rss_mb": round(imported["rss_mb"]),
              "bundle_mb": round(sum(p.stat().st_size for p in bundle.iterdir()) / 2**20)}
    onnx64 = run_child(["--child", str(bundle), "onnx-64", str(repeats)])
    panels64 = run_child(["--child", str(bundle), "onnx-64-panels", str(repeats)])
    panels = run_child(["--child", str(bundle), "onnx-1024", str(max(1, repeats // 2))])
    numpy64 = run_child(["--child", str(bundle), "numpy-64", str(repeats)])
    update = run_child(["--child-update", str(bundle), str(repeats), "partial"])
    update_full = run_child(["--child-update", str(bundle), str(repeats), "full"])
    result.update({"load_s": round(onnx64["load_s"], 2),
                   "forward_onnx_ms.64": round(onnx64["ms"]), "rss_mb.64": round(onnx64["rss_mb"]),
                   "forward_onnx_ms.64_panels": round(panels64["ms"]),
                   "forward_onnx_ms.1024_panels": round(panels["ms"]), "rss_mb.1024_panels": round(panels["rss_mb"]),
                   "forward_numpy_ms.64": round(numpy64["ms"]), "rss_mb.numpy_64": round(numpy64["rss_mb"]),
                   "update_ms.64": round(update["ms"]), "rss_mb.update_64": round(update["rss_mb"]),
                   "update_ms.64_full_trace": round(update_full["ms"]),
                   "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)]})
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-import":
        from core.hf_import import import_model

        start = time.perf_counter()
        import_model(sys.argv[2], sys.argv[3])
        print(json.dumps(dict(s=time.perf_counter() - start, rss_mb=peak_rss_mb())))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child-update":
        child_update(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "full")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child_measure(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workdir", help="keep the folders here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        results = [bench_shape(shape, work, args.repeats) for shape in args.shapes.split(",")]
    if args.json:
        print(json.dumps({"cpu_count": os.cpu_count(), "results": results}, indent=2))
    else:
        for r in results:
            print("  ".join(f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
