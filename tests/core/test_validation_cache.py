"""core.validation_cache: a bundle that passed the ONNX checker and the dry run skips them on the next open,
and only while its files, the core code and the libraries are those that passed."""
from __future__ import annotations

import json

import numpy as np
import pytest

import core.runners
from core import validation_cache
from core.bundle import BundleError, load_bundle
from core.runners import NumpyRunner
from tests import hostile_bundles as hostile


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return validation_cache.cache_file()


@pytest.fixture
def folder(bundle, tmp_path):
    return hostile.copy_bundle(bundle.path, tmp_path / "b")


@pytest.fixture
def checks(monkeypatch):
    """How many times load_bundle ran the dry run and the ONNX checker."""
    calls = {"dry_run": 0, "checker": 0}
    real_dry_run, real_checker = core.runners.dry_run, core.bundle.onnx.checker.check_model

    def dry_run(bundle):
        calls["dry_run"] += 1
        real_dry_run(bundle)

    def checker(model, **kwargs):
        calls["checker"] += 1
        real_checker(model, **kwargs)

    monkeypatch.setattr(core.runners, "dry_run", dry_run)
    monkeypatch.setattr(core.bundle.onnx.checker, "check_model", checker)
    return calls


def test_a_bundle_that_passed_is_not_checked_again_and_loads_the_same(cache, folder, checks):
    first = load_bundle(folder)
    assert checks == {"dry_run": 1, "checker": 1}
    second = load_bundle(folder)
    assert checks == {"dry_run": 1, "checker": 1}
    assert cache.is_file()
    assert second.model_bytes == first.model_bytes and second.config == first.config
    ids = [1, 2, 3, 4]
    assert np.array_equal(NumpyRunner(second).run(ids).logits, NumpyRunner(first).run(ids).logits)


@pytest.mark.parametrize("change", ["tokenizer", "model"])
def test_any_changed_file_is_checked_again(cache, folder, checks, change):
    load_bundle(folder)
    if change == "tokenizer":
        text = (folder / "tokenizer.json").read_text(encoding="utf-8")
        (folder / "tokenizer.json").write_text(text + "\n", encoding="utf-8")
    else:
        hostile.save_model(folder, hostile.strip_metadata(hostile.load_model(folder)))
    load_bundle(folder)
    assert checks == {"dry_run": 2, "checker": 2}


def test_a_config_edited_after_it_passed_is_still_refused_when_the_graph_disagrees(cache, folder, checks):
    """The dry run's reason to be (a config value the graph does not share) is not hidden by the cache."""
    hostile.save_model(folder, hostile.strip_metadata(hostile.load_model(folder)))
    load_bundle(folder)
    hostile.write_config(folder, rope_theta=hostile.config_dict(folder)["rope_theta"] * 3)
    with pytest.raises(BundleError, match="disagree"):
        load_bundle(folder)
    assert checks["dry_run"] == 2


def test_a_change_of_the_core_code_checks_again(cache, folder, checks, monkeypatch):
    load_bundle(folder)
    real = validation_cache._environment
    monkeypatch.setattr(validation_cache, "_environment", lambda: real() + b"# an edited core module")
    load_bundle(folder)
    assert checks["dry_run"] == 2


def test_a_bundle_that_failed_is_refused_every_time(cache, folder, checks):
    hostile.save_model(folder, hostile.narrow_logits(hostile.load_model(folder), 128, declared=False))
    for attempt in (1, 2):
        with pytest.raises(BundleError, match="test run"):
            load_bundle(folder)
        assert checks["dry_run"] == attempt


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"passed": 7}', '{"passed": [3, null]}'])
def test_a_corrupt_cache_file_counts_as_empty(cache, folder, checks, content):
    cache.parent.mkdir(parents=True)
    cache.write_text(content, encoding="utf-8")
    load_bundle(folder)
    load_bundle(folder)
    assert checks["dry_run"] == 1
    assert len(json.loads(cache.read_text(encoding="utf-8"))["passed"]) == 1


def test_an_unwritable_cache_only_costs_the_checks(tmp_path, monkeypatch, folder, checks):
    blocker = tmp_path / "file_not_folder"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))   # glassbox/ cannot be made inside a file
    load_bundle(folder)
    load_bundle(folder)
    assert checks["dry_run"] == 2


def test_the_cache_keeps_only_the_latest_keys(cache):
    for n in range(validation_cache.MAX_KEYS + 5):
        validation_cache.remember(f"key{n}")
    assert not validation_cache.passed("key0")
    assert validation_cache.passed(f"key{validation_cache.MAX_KEYS + 4}")
    assert len(json.loads(cache.read_text(encoding="utf-8"))["passed"]) == validation_cache.MAX_KEYS


def test_mapped_external_data_is_known_by_its_size_and_time(cache, folder, checks, monkeypatch):
    """A real model's GBs are not read for the key: a rewrite of the data file changes its mtime, and checks again."""
    monkeypatch.setattr("core.bundle.MAX_READ_EXTERNAL_BYTES", 0)
    data = hostile.externalize_weights(folder) / "weights.bin"
    load_bundle(folder)
    load_bundle(folder)
    assert checks["dry_run"] == 1
    content = data.read_bytes()
    data.unlink()
    data.write_bytes(content)   # a new file: another inode and modification time
    load_bundle(folder)
    assert checks["dry_run"] == 2
