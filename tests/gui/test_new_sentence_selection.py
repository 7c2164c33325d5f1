"""A new sentence selects its last token (the query the user looked at belonged to the old one)."""
from __future__ import annotations

from gui.controller import Controller
from gui.selection import Selection


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


def test_extending_the_sentence_keeps_the_clicked_query(qtbot, bundle):
    controller = Controller(bundle, "numpy")
    try:
        analyse_now(qtbot, controller, "The cat sat on the mat.")
        controller.select({"query": 2, "key": 1})
        analyse_now(qtbot, controller, "The cat sat on the mat. The dog")
        assert (controller.selection.query, controller.selection.key) == (2, 1)
    finally:
        controller.shutdown()


def test_a_sentence_typed_into_the_emptied_bar_selects_its_last_token(qtbot, bundle):
    """The review's case: a click on query 9, the bar cleared, a longer new sentence typed."""
    controller = Controller(bundle, "numpy")
    try:
        analyse_now(qtbot, controller, "The cat sat on the mat because it was tired.")
        controller.select({"query": 9})
        controller.set_text("")
        controller.flush()
        qtbot.waitUntil(lambda: controller.trace is None and not controller.busy(), timeout=20000)
        analyse_now(qtbot, controller, "A dog ran into the garden and barked at the birds all day.")
        assert controller.trace.n_tokens > 10
        assert controller.selection.query is None
    finally:
        controller.shutdown()


def test_the_query_stays_exactly_while_the_tokens_up_to_it_are_unchanged():
    clicked = Selection(layer=1, head=2, query=2, key=1)
    assert clicked.for_tokens([5, 6, 7], [5, 6, 7, 8]) == clicked          # extended
    assert clicked.for_tokens([5, 6, 7, 8], [5, 6, 7, 9]) == clicked       # edited after it
    assert clicked.for_tokens([5, 6, 7], [5, 6, 4, 8]) == Selection(1, 2)  # its token changed
    assert clicked.for_tokens([5, 6, 7], [5, 6]) == Selection(1, 2)        # its token is gone
    assert clicked.for_tokens(None, [5, 6, 7]) == Selection(1, 2)          # nothing to compare with
    assert Selection().for_tokens([1], [2]) == Selection()                 # the last token stays the last
