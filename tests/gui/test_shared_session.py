"""The model worker and the experiment worker share one onnxruntime session (a real model's packed weights
are 1.5 GB a session): the experiment's runner is the sentence's, and its runs match a runner of its own."""
from __future__ import annotations

import numpy as np
import pytest

from core.runners import OnnxRunner
from gui.controller import EXPERIMENT_WORKER_NAME, Controller
from gui.experiment_job import ExperimentJob

WAIT_MS = 20000


@pytest.fixture()
def controller(qtbot, bundle):
    c = Controller(bundle, "onnx")
    yield c
    c.shutdown()


def test_the_experiment_worker_runs_on_the_session_of_the_sentence(qtbot, controller, bundle):
    import threading

    controller.set_text("Hello world")
    controller.flush()
    qtbot.waitUntil(lambda: controller.trace is not None and not controller.busy(), timeout=WAIT_MS)
    analysis_session = controller.runners.get("onnx")._full_session()
    seen, done = {}, []

    def fn(runner):   # the AblatedRunner the controller hands an experiment wraps the runner it uses
        seen["thread"] = threading.current_thread().name
        seen["session"] = runner.runner._full_session()
        return runner.run(controller.trace.input_ids)

    controller.run_experiment(ExperimentJob(fn, done.append, pytest.fail))
    qtbot.waitUntil(lambda: bool(done), timeout=WAIT_MS)
    assert seen["thread"] == EXPERIMENT_WORKER_NAME
    assert seen["session"] is analysis_session
    separate = OnnxRunner(bundle).run(controller.trace.input_ids)
    assert separate.to_arrays().keys() == done[0].to_arrays().keys()
    for name, value in separate.to_arrays().items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(done[0].to_arrays()[name], value, rtol=0, atol=1e-6, err_msg=name)
        else:   # ids, expert choices, the ablate mode's name
            np.testing.assert_array_equal(done[0].to_arrays()[name], value, err_msg=name)


def test_runs_from_two_threads_at_once_match_runs_one_after_the_other(bundle):
    from concurrent.futures import ThreadPoolExecutor

    runner = OnnxRunner(bundle)
    sentences = [np.arange(1, 12) % bundle.config.vocab_size, np.arange(5, 30) % bundle.config.vocab_size]
    alone = [runner.run_logits(ids) for ids in sentences]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(runner.run_logits, sentences * 3))
    for i, logits in enumerate(together):
        np.testing.assert_array_equal(logits, alone[i % 2])
