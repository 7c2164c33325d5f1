"""One eliding rule for every panel: a wide (CJK) character counts as two columns."""
from __future__ import annotations

from gui.text_fit import columns, elide


def test_a_chinese_character_counts_as_two_columns():
    assert columns("cat") == 3
    assert columns("订单") == 4
    assert columns("␣订a") == 4


def test_labels_that_fit_are_kept_whole():
    assert elide("订单", 4) == "订单"
    assert elide("mat", 3) == "mat"


def test_chinese_labels_are_cut_at_the_same_width_as_english_ones():
    english, chinese = elide("abcdefghijklmnop", 12), elide("老师在黑板上写了一个例子", 12)
    assert english == "abcdefghijk…" and columns(english) == 12
    assert chinese == "老师在黑板…" and columns(chinese) <= 12
