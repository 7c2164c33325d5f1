"""The .glassbox session file: what the user was looking at, so that reopening shows it again.

A small UTF-8 JSON object, readable and hand-editable:

    {"format": "glassbox-session", "version": 1,
     "sentences": ["The cat sat."], "bundle": "/path/to/bundle" or null (the shipped model),
     "token_ids": [464, 3797, 3332] or null,   (sentence 1's ids when they came from Append / Generate:
                                                its text need not tokenize back to them)
     "backend": "onnx" | "numpy" | "both",
     "selection": {"layer": 0, "head": 0, "query": null, "key": null, "step": null},
     "sampling": {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "greedy": false, "seed": 0},
     "interventions": {"head_mask": [[1.0, 0.0]], "ablate_mode": "zero", ...},
                      (core.interventions' names and meaning; arrays as nested lists)
     "dock_layout": "<base64 of QMainWindow.saveState()>"}

Reading is strict about what it knows and silent about what it does not: any key this version
does not know (a newer version's addition) is ignored; a known key of the wrong kind, bad JSON
or a file that is not a session raises one SessionError and returns nothing, so the caller
changes nothing. Only `format`, `version` and `sentences` are required; other keys default.
A bundle folder that no longer exists is not an error: the session opens on the shipped model,
and `OpenedSession.missing_bundle` says which folder was missing.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from core.atomic import atomic_write_bytes
from core.interventions import ABLATE_MODES, ARRAY_FIELDS, Interventions
from core.sampling import SamplingSettings

FORMAT = "glassbox-session"
SCHEMA_VERSION = 1
SUFFIX = ".glassbox"
BACKENDS = ("onnx", "numpy", "both")
SELECTION_KEYS = ("layer", "head", "query", "key", "step")
# None means: the last token (query), the query itself (key), the merge replay's last step (step)
NULLABLE_SELECTION = ("query", "key", "step")
WHOLE_NUMBER_FIELDS = ("expert_override", "experts_off", "resid_patch_mask", "head_patch_mask",
                       "expert_patch_mask")   # ids and masks: a fraction there is a damaged file
MAX_FILE_BYTES = 64 * 1024 * 1024  # a session is kilobytes; anything this big is not one


class SessionError(ValueError):
    """A session file that cannot be used; str(error) is the one-line message for the user."""


@dataclass(frozen=True)
class Session:
    sentences: tuple[str, ...] = ("",)
    token_ids: tuple[int, ...] | None = None  # the first sentence's ids when its text does not give them
    bundle: str | None = None                 # bundle folder; None: the shipped model
    backend: str = "onnx"
    selection: Mapping[str, int | None] = field(
        default_factory=lambda: {"layer": 0, "head": 0, "query": None, "key": None, "step": None})
    sampling: SamplingSettings = SamplingSettings()
    interventions: Mapping[str, list] = field(default_factory=dict)
    dock_layout: str = ""                     # base64; "" keeps the window's current layout

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": SCHEMA_VERSION, "sentences": list(self.sentences),
                "token_ids": None if self.token_ids is None else list(self.token_ids),
                "bundle": self.bundle, "backend": self.backend, "selection": dict(self.selection),
                "sampling": asdict(self.sampling), "interventions": dict(self.interventions),
                "dock_layout": self.dock_layout}


@dataclass(frozen=True)
class OpenedSession:
    session: Session                  # ready to apply; its bundle is None if the named one is missing
    missing_bundle: str | None = None  # the folder the file named, when it does not exist

    @property
    def message(self) -> str:
        if self.missing_bundle is None:
            return ""
        return f"the session's model {self.missing_bundle} is not there; opened with the default model"


# ---------------------------------------------------------------- validation of each key

def _fail(path: Path, why: str) -> SessionError:
    return SessionError(f"{path.name}: not a usable Glassbox session ({why})")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return _is_int(x) or (isinstance(x, float) and math.isfinite(x))


def _sentences(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(s, str) for s in raw):
        raise ValueError("sentences must be a non-empty list of strings")
    return tuple(raw)


def _token_ids(raw: Any) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or not all(_is_int(i) and 0 <= i < 2**31 for i in raw):
        raise ValueError("token_ids must be a non-empty list of token ids or null")
    return tuple(raw)


def _bundle(raw: Any) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw):
        raise ValueError("bundle must be a folder path or null")
    return raw


def _backend(raw: Any) -> str:
    if raw not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {raw!r}")
    return raw


def _selection(raw: Any) -> dict[str, int | None]:
    if not isinstance(raw, dict):
        raise ValueError("selection must be an object")
    out = dict(Session().selection)
    for key in SELECTION_KEYS:
        value = raw.get(key, out[key])
        nullable = key in NULLABLE_SELECTION
        if not ((_is_int(value) and value >= 0) or (nullable and value is None)):
            raise ValueError(f"selection.{key} must be a whole number >= 0" + (" or null" if nullable else ""))
        out[key] = value
    return out


def _sampling(raw: Any) -> SamplingSettings:
    if not isinstance(raw, dict):
        raise ValueError("sampling must be an object")
    d = asdict(SamplingSettings())
    d.update({k: raw[k] for k in d if k in raw})
    if not (_is_number(d["temperature"]) and d["temperature"] >= 0):
        raise ValueError("sampling.temperature must be a number >= 0")
    if not (_is_int(d["top_k"]) and d["top_k"] >= 0):
        raise ValueError("sampling.top_k must be a whole number >= 0 (0 keeps all)")
    if not (_is_number(d["top_p"]) and 0 < d["top_p"] <= 1):
        raise ValueError("sampling.top_p must be a number in (0, 1]")
    if not isinstance(d["greedy"], bool):
        raise ValueError("sampling.greedy must be true or false")
    if not (_is_int(d["seed"]) and 0 <= d["seed"] < 2**63):
        raise ValueError("sampling.seed must be a whole number >= 0")
    return SamplingSettings(float(d["temperature"]), d["top_k"], float(d["top_p"]), d["greedy"], d["seed"])


def _plain_list(x: Any) -> bool:
    # numbers, booleans and nulls nested in lists: what an array of any shape becomes in JSON
    if isinstance(x, list):
        return all(_plain_list(item) for item in x)
    return x is None or isinstance(x, bool) or _is_number(x)


def _interventions(raw: Any) -> dict[str, list]:
    if not isinstance(raw, dict):
        raise ValueError("interventions must be an object")
    for name, value in raw.items():
        if name == "ablate_mode" and isinstance(value, str):
            if value not in ABLATE_MODES:
                raise ValueError(f"interventions.ablate_mode must be one of {', '.join(ABLATE_MODES)}")
            continue
        if not isinstance(value, list) or not _plain_list(value):
            raise ValueError(f"interventions.{name} must be a list (of numbers, possibly nested)")
    return dict(raw)


def _dock_layout(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("dock_layout must be a base64 string")
    try:
        base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("dock_layout is not valid base64") from None
    return raw


_READERS = {"sentences": _sentences, "token_ids": _token_ids, "bundle": _bundle, "backend": _backend, "selection": _selection,
            "sampling": _sampling, "interventions": _interventions, "dock_layout": _dock_layout}


def session_from_json(data: Any) -> Session:
    """Validate a parsed session object; ValueError names the first bad key."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f'no "format": "{FORMAT}" in it')
    version = data.get("version")
    if not _is_int(version) or version < 1:
        raise ValueError("version must be a whole number >= 1")
    if "sentences" not in data:
        raise ValueError("sentences is missing")
    # Keys of a newer version are ignored on purpose: the file still opens with what this one knows.
    return Session(**{key: read(data[key]) for key, read in _READERS.items() if key in data})


# ---------------------------------------------------------------- interventions <-> JSON

def interventions_to_json(interventions: Interventions) -> dict[str, Any]:
    """The arrays given (nested lists: a float32 goes through JSON's float64 exactly) and the ablation mode."""
    arrays = {name: getattr(interventions, name).tolist() for name in ARRAY_FIELDS
              if getattr(interventions, name) is not None}
    return {**arrays, "ablate_mode": interventions.ablate_mode}


def interventions_from_json(raw: Mapping[str, Any]) -> Interventions:
    """The Interventions a session names; names this version does not know are ignored. ValueError if unusable
    (shapes are checked against the model by the run that uses them)."""
    arrays = {}
    for name in ARRAY_FIELDS:
        if name in raw:
            try:
                array = np.array(raw[name], dtype=np.float64)   # ragged lists fail here; null becomes nan
            except (TypeError, ValueError):
                array = None
            if array is None or not np.isfinite(array).all():
                raise ValueError(f"interventions.{name} is not a rectangular array of finite numbers")
            if name in WHOLE_NUMBER_FIELDS and not np.array_equal(array, np.round(array)):
                raise ValueError(f"interventions.{name} must hold whole numbers")
            arrays[name] = array
    mode = raw.get("ablate_mode", "zero")
    if mode not in ABLATE_MODES:
        raise ValueError(f"interventions.ablate_mode must be one of {', '.join(ABLATE_MODES)}")
    return Interventions(ablate_mode=mode, **arrays)


# ---------------------------------------------------------------- files

def _resolve_bundle(bundle: str | None, session_path: Path) -> str | None:
    # a relative bundle path (hand-written) is relative to the session file, not to the working folder
    if bundle is None or os.path.isabs(bundle):
        return bundle
    return str((session_path.parent / bundle).resolve())


def load_session(path: str | os.PathLike) -> OpenedSession:
    """Read and validate a session file; raise SessionError (one line) for anything unusable."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise _fail(path, "far too large")
        text = path.read_bytes().decode("utf-8")
        session = session_from_json(json.loads(text))
    except OSError as exc:
        raise SessionError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise _fail(path, "nested too deeply") from None
    except ValueError as exc:
        raise _fail(path, str(exc)) from None
    bundle = _resolve_bundle(session.bundle, path)
    if bundle is not None and not Path(bundle).is_dir():
        return OpenedSession(replace(session, bundle=None), missing_bundle=bundle)
    return OpenedSession(replace(session, bundle=bundle))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def session_bytes(session: Session) -> bytes:
    """The file's bytes: indented UTF-8 JSON (Chinese stays readable; lone surrogates as \\u escapes)."""
    data = session.to_json()
    session_from_json(data)  # never write a file this module would refuse to read
    text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def save_session(session: Session, path: str | os.PathLike) -> Path:
    """Write atomically: a failed save leaves any earlier file as it was. Raises SessionError."""
    path = Path(path)
    try:
        data = session_bytes(session)
    except ValueError as exc:
        raise SessionError(f"cannot save this session: {exc}") from None
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise SessionError(f"{path}: cannot write it ({exc.strerror or exc})") from None
    return path
