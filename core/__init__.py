"""Glassbox core: tokenizer, NumPy reference model, ONNX export and runners.

Pure Python + NumPy + onnx/onnxruntime. Never imports Qt or pyqtgraph.
"""
