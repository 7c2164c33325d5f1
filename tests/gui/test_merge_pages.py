"""The tokens_merges figure is the whole replay: a row for every merge, bytes to tokens, on as many
numbered pages as a long sentence needs, each page within its height and no row left out."""
from __future__ import annotations

import pytest

from core.bench import text_of_tokens
from core.runners import NumpyRunner
from core.session import analyse
from core.tokens_view import MergeReplay
from gui.figure_pages import on_page
from gui.headless import ExportRequest
from gui.merge_pages import MERGED_FILL, PAGE_ROWS_HEIGHT, page_name, whole_rows

ENGLISH = "The quick brown fox jumps over the lazy dog."
CHINESE = "我们今天去公园散步，看到了很多花。"


def merge_pages(host, trace) -> list:
    """The figures an export of tokens_merges writes."""
    return host.figures(trace, ExportRequest(figures=("tokens_merges",)))


def shown_rows(pages) -> list[tuple[str, list[str], list[bool]]]:
    """Every row of every page, in order: its label, its pieces' text and which are highlighted."""
    return [(row.label.text(), [row.flow.chip_lines(i)[0] for i in range(row.flow.chip_count())],
             [chip.fill == MERGED_FILL for chip in row.chips])
            for page in pages for row in page.widget.rows]


@pytest.mark.parametrize("text", [ENGLISH, CHINESE, "long"])
def test_every_merge_of_the_replay_has_its_row(host, bundle, text):
    if text == "long":
        text = text_of_tokens(bundle.tokenizer, 64)
    trace = analyse(NumpyRunner(bundle), text)
    replay = MergeReplay(trace.tokenization)
    whole = whole_rows(replay)
    assert whole == (text in (ENGLISH, CHINESE))   # a long sentence's rows: only the words each merge changed

    def pieces(k):
        return replay.step(k).pieces if whole or k in (0, replay.n_steps) else replay.changed_words(k)

    expected = [(replay.row_label(k), [p.text for p in pieces(k)], [p.fresh for p in pieces(k)])
                for k in range(replay.n_steps + 1)]
    assert all(any(fresh) for _, _, fresh in expected[1:])   # every merge's row shows what it made
    pages = merge_pages(host, trace)
    assert [page.name for page in pages] == [page_name(i) for i in range(len(pages))]
    assert shown_rows(pages) == expected   # every step once, in order, bytes first and tokens last
    assert expected[-1][1] == [t.display for t in trace.tokenization.tokens]


def test_a_long_replay_goes_on_numbered_pages_that_say_what_they_hold(host, bundle):
    trace = analyse(NumpyRunner(bundle), text_of_tokens(bundle.tokenizer, 64))
    pages = merge_pages(host, trace)
    assert len(pages) > 1 and pages[1].name == "tokens_merges_2"
    assert pages[0].table is not None and all(page.table is None for page in pages[1:])   # one CSV: every step
    for index, page in enumerate(pages):
        steps = page.widget.steps
        assert f"page {index + 1} of {len(pages)} (steps {steps[0]}–{steps[-1]})" in page.widget.heading.text()
        with on_page(page) as laid_out:
            rows = sum(row.flow.height() for row in laid_out.rows)
            assert rows <= PAGE_ROWS_HEIGHT
            assert all(row.flow.geometry().bottom() < laid_out.note.geometry().top() for row in laid_out.rows)


def test_a_short_replay_is_one_page(host, bundle):
    pages = merge_pages(host, analyse(NumpyRunner(bundle), ENGLISH))
    assert [page.name for page in pages] == ["tokens_merges"]
    assert "page" not in pages[0].widget.heading.text()
