"""A new sentence selects its last token (the query the user looked at belonged to the old one)."""
from __future__ import annotations

from gui.controller import Controller


def analyse_now(qtbot, controller: Controller, text: str) -> None:
    controller.set_text(text)
    controller.flush()
    qtbot.waitUntil(lambda: controller.trace is not None and controller.trace.text == text
                    and not controller.busy(), timeout=20000)


def test_a_new_sentence_selects_its_last_token_and_keeps_layer_and_head(qtbot, bundle):
    controller = Controller(bundle, "numpy")
    try:
        analyse_now(qtbot, controller, "The cat sat on the mat because it was tired.")
        controller.select({"layer": 1, "head": 2, "query": 3, "key": 1})
        analyse_now(qtbot, controller, "订单成交，订单取消，查询订单。")
        selection = controller.selection
        assert (selection.query, selection.key) == (None, None)
        assert selection.query_index(controller.trace.n_tokens) == controller.trace.n_tokens - 1
        assert (selection.layer, selection.head) == (1, 2)
    finally:
        controller.shutdown()


def test_running_the_same_sentence_again_keeps_the_selected_token(qtbot, bundle):
    controller = Controller(bundle, "numpy")
    try:
        analyse_now(qtbot, controller, "The cat sat on the mat.")
        controller.select({"query": 2})
        controller.set_backend("onnx")
        qtbot.waitUntil(lambda: not controller.busy(), timeout=20000)
        assert controller.selection.query == 2
    finally:
        controller.shutdown()
