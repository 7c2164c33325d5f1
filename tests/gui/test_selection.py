"""The shared selection resolves 'last token' and stays inside a smaller model or sentence."""
from gui.selection import Selection


def test_none_query_means_the_last_token_and_none_key_means_the_query():
    sel = Selection()
    assert sel.query_index(5) == 4 and sel.key_index(5) == 4
    assert Selection(query=2).key_index(5) == 2


def test_key_never_lies_in_the_future_of_the_query():
    assert Selection(query=1, key=3).key_index(5) == 1


def test_clamping_keeps_a_key_chosen_while_the_query_is_the_last_token():
    assert Selection(key=2).clamped(2, 4, 5).key == 2
    assert Selection(key=7).clamped(2, 4, 5).key is None


def test_clamping_into_a_smaller_model_and_sentence():
    sel = Selection(layer=5, head=9, query=10, key=3).clamped(2, 4, 6)
    assert (sel.layer, sel.head, sel.query, sel.key) == (1, 3, None, 3)
