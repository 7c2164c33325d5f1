"""Hostile bundles for the gate's tests, each made from a random bundle the project's own code wrote.

Every helper edits a copy in place and returns its folder; none is a fixture, so a test says
exactly which damage it does.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODEL = "model.onnx"


def copy_bundle(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


# ---------------------------------------------------------------- config.json

def config_dict(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def write_config(folder: Path, **changes) -> Path:
    """config.json with keys changed; values are written as given (json.dumps keeps NaN as NaN)."""
    data = {**config_dict(folder), **changes}
    (folder / "config.json").write_text(json.dumps(data))
    return folder


def write_config_raw(folder: Path, key: str, literal: str) -> Path:
    """config.json with one value replaced by literal JSON text (a 400-digit number, Infinity...)."""
    data = config_dict(folder)
    data[key] = "__VALUE__"
    (folder / "config.json").write_text(json.dumps(data).replace('"__VALUE__"', literal))
    return folder


def deeply_nested_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


# ---------------------------------------------------------------- model.onnx

def load_model(folder: Path) -> onnx.ModelProto:
    return onnx.load(str(folder / MODEL), load_external_data=False)


def save_model(folder: Path, model: onnx.ModelProto) -> Path:
    (folder / MODEL).write_bytes(model.SerializeToString())
    return folder


def strip_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    del model.metadata_props[:]
    return model


def external_tensor(name: str, location: str, shape: tuple[int, ...], offset: int = 0) -> TensorProto:
    """A float32 TensorProto whose bytes live at `location` (relative to the bundle, as ONNX says)."""
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(4 * int(np.prod(shape))))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def add_constant_node(model: onnx.ModelProto, tensor: TensorProto, output: str = "smuggled") -> onnx.ModelProto:
    """A Constant node holding `tensor` (its output unused: the gate must refuse before anything runs)."""
    model.graph.node.append(helper.make_node("Constant", [], [output], value=tensor))
    return model


def add_nested_constant(model: onnx.ModelProto, tensor: TensorProto) -> onnx.ModelProto:
    """An If node whose branches are subgraphs holding a Constant with `tensor`."""
    def branch(name: str) -> onnx.GraphProto:
        node = helper.make_node("Constant", [], [f"{name}_out"], value=tensor)
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, list(tensor.dims))
        return helper.make_graph([node], name, [], [out])

    cond = helper.make_node("Constant", [], ["nested_cond"], value=numpy_helper.from_array(np.array(True)))
    model.graph.node.extend([cond, helper.make_node("If", ["nested_cond"], ["nested_out"],
                                                    then_branch=branch("then"), else_branch=branch("else"))])
    return model


def externalize_weights(folder: Path, location: str = "weights.bin") -> Path:
    """Store every large initializer in one external file, as onnx.save_model does."""
    model = onnx.load(str(folder / MODEL))
    onnx.save_model(model, str(folder / MODEL), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=1024)
    return folder


def drop_graph_input(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    kept = [value for value in model.graph.input if value.name != name]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return model


def set_initializer(model: onnx.ModelProto, name: str, value: np.ndarray) -> onnx.ModelProto:
    for tensor in model.graph.initializer:
        if tensor.name == name:
            tensor.CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32), name))
            return model
    raise KeyError(name)


def initializer(model: onnx.ModelProto, name: str) -> np.ndarray:
    return next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


def narrow_logits(model: onnx.ModelProto, width: int, declared: bool) -> onnx.ModelProto:
    """The logits output cut to its first `width` columns; `declared` says whether its shape says so too
    (if not, the vocabulary axis is declared symbolic, which the checker and a shape check accept)."""
    producer = next(node for node in model.graph.node if "logits" in node.output)
    producer.output[list(producer.output).index("logits")] = "logits_full"
    starts, ends, axes = (numpy_helper.from_array(np.array(v, np.int64), n) for v, n in
                          (([0], "cut_starts"), ([width], "cut_ends"), ([2], "cut_axes")))
    model.graph.initializer.extend([starts, ends, axes])
    model.graph.node.append(helper.make_node("Slice", ["logits_full", "cut_starts", "cut_ends", "cut_axes"],
                                             ["logits"]))
    output = next(value for value in model.graph.output if value.name == "logits")
    if declared:
        output.type.tensor_type.shape.dim[2].dim_value = width
    else:
        output.type.tensor_type.shape.dim[2].dim_param = "V"
    return model


def use_custom_op(model: onnx.ModelProto) -> onnx.ModelProto:
    """One Sigmoid moved to a custom domain: onnxruntime cannot run it, NumPy never notices."""
    node = next(node for node in model.graph.node if node.op_type == "Sigmoid")
    node.domain = "com.example.glassbox"
    model.opset_import.append(helper.make_opsetid("com.example.glassbox", 1))
    return model


# ---------------------------------------------------------------- tokenizer.json

def edit_tokenizer(folder: Path, edit) -> Path:
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return folder


def empty_special_token(data: dict) -> None:
    token = data["added_tokens"][0]
    data["model"]["vocab"][""] = data["model"]["vocab"].pop(token["content"])
    token["content"] = ""


# ---------------------------------------------------------------- a model whose runs are NaN

def make_nan_producing(folder: Path) -> Path:
    """Finite weights whose every run is NaN: layer 0's norm scales its input past float32's range.

    RMSNorm's output is O(1) per cell; times 3e38 a quarter of the cells become +-inf, and each
    query/key/value dot product then sums +inf and -inf: NaN, the same in both runners.
    """
    model = load_model(folder)
    weight = "model.layers.0.input_layernorm.weight"
    set_initializer(model, weight, np.full(initializer(model, weight).shape, 3e38, np.float32))
    return save_model(folder, model)
