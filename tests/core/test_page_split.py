"""balanced_pages: every row on exactly one page, in order, pages within the budget and about equal."""
from __future__ import annotations

import pytest

from core.page_split import balanced_pages


def rows_of(pages) -> list[int]:
    return [i for page in pages for i in page]


def test_rows_that_fit_are_one_page():
    assert balanced_pages([1.0] * 26, budget=64) == (range(0, 26),)


@pytest.mark.parametrize("heights, budget", [
    ([3.0] * 100, 64), ([1.0, 5.0, 2.0, 9.0, 1.0, 1.0, 4.0] * 30, 20), ([10.0] + [2.0] * 57, 30),
])
def test_every_row_is_on_one_page_in_order_within_the_budget(heights, budget):
    pages = balanced_pages(heights, budget)
    assert rows_of(pages) == list(range(len(heights)))
    assert len(pages) > 1 and all(len(page) for page in pages)
    assert all(sum(heights[i] for i in page) <= budget for page in pages)


def test_pages_are_about_equally_full():
    pages = balanced_pages([1.0] * 65, budget=64)   # not 64 rows and then 1
    assert [len(page) for page in pages] in ([33, 32], [32, 33])


def test_a_row_taller_than_a_page_gets_its_own_page():
    pages = balanced_pages([2.0, 50.0, 2.0], budget=10)
    assert rows_of(pages) == [0, 1, 2] and range(1, 2) in pages
