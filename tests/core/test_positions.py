"""core.positions: the sinusoid table, RoPE pairs read from a real Trace, the relative-position property."""
from __future__ import annotations

import numpy as np
import pytest

from core import positions as pos
from core.model import apply_rope, rope_inv_freq
from core.runners import NumpyRunner
from core.session import analyse

SENTENCES = ["Every token looks back at the tokens that came before it.", "旋转位置编码让相对距离变得可见。"]


@pytest.fixture(scope="module", params=SENTENCES, ids=["english", "chinese"])
def trace(request, bundle):
    return analyse(NumpyRunner(bundle), request.param)


def circular_gap(a, b):
    """Distance between angles on the circle, in radians."""
    return np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b)))))


# ---------------------------------------------------------------- sinusoidal

def test_sinusoidal_table_follows_the_papers_formula():
    d = 6
    table = pos.sinusoidal_table(4, d)
    assert table.shape == (4, d)
    np.testing.assert_allclose(table[0], [0, 1, 0, 1, 0, 1], atol=1e-7)  # position 0: sin 0, cos 0
    for p in range(4):
        for j in range(d // 2):
            angle = p / 10000 ** (2 * j / d)
            assert table[p, 2 * j] == pytest.approx(np.sin(angle), abs=1e-6)
            assert table[p, 2 * j + 1] == pytest.approx(np.cos(angle), abs=1e-6)


def test_sinusoid_rows_are_distinct_and_bounded():
    table = pos.sinusoidal_table(128, 64)
    assert np.abs(table).max() <= 1.0
    assert len({row.tobytes() for row in table}) == 128  # every position gets its own vector


def test_smooth_curve_passes_through_the_table_at_integer_positions():
    table = pos.sinusoidal_table(10, 16)
    np.testing.assert_allclose(pos.sinusoidal_values(np.arange(10.0), 16), table, atol=1e-6)


def test_embed_plus_pe_adds_the_table_to_the_traces_embedding(trace):
    summed = pos.embed_plus_pe(trace.embed)
    np.testing.assert_allclose(summed - trace.embed, pos.sinusoidal_table(*trace.embed.shape), atol=1e-6)


def test_dims_to_show_are_valid_and_include_a_sin_cos_pair():
    for d in (6, 64, 128):
        dims = pos.sinusoidal_dims_to_show(d)
        assert dims[:2] == [0, 1] and all(0 <= x < d for x in dims) and dims == sorted(set(dims))


# ---------------------------------------------------------------- RoPE pairing and rotation

def test_pair_dims_are_the_planes_apply_rope_turns_in():
    head_dim = 16
    for i, (a, b) in enumerate(pos.pair_dims(head_dim)):
        x = np.zeros((1, 1, head_dim), np.float32)
        x[..., a], x[..., b] = 1.0, 0.5
        turned = apply_rope(x, np.array([7]), 10000.0)[0, 0]
        others = np.delete(turned, [a, b])
        assert np.abs(others).max() == 0.0, f"pair {i} leaked out of its plane"
        assert np.hypot(turned[a], turned[b]) == pytest.approx(np.hypot(1.0, 0.5), rel=1e-6)


def test_float64_rotation_matches_the_models_apply_rope():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 40, 16)).astype(np.float32)
    positions = np.arange(40)
    ours = pos.rotate(x, pos.pair_angles(positions, 16, 10000.0)[None])
    np.testing.assert_allclose(ours, apply_rope(x, positions, 10000.0), atol=2e-5)


def test_pair_frequencies_are_the_models_and_fall_from_fast_to_slow():
    freq = pos.pair_frequencies(16, 10000.0)
    np.testing.assert_array_equal(freq.astype(np.float32), rope_inv_freq(16, 10000.0))
    assert freq[0] == 1.0 and np.all(np.diff(freq) < 0)


def test_wrap_angle_lands_in_one_turn():
    wrapped = pos.wrap_angle(np.array([-0.5, 0.0, 7.0, 100.0]))
    assert np.all((wrapped >= 0) & (wrapped < 2 * np.pi))
    np.testing.assert_allclose(circular_gap(wrapped, [-0.5, 0.0, 7.0, 100.0]), 0, atol=1e-12)


# ---------------------------------------------------------------- RoPE pairs of a real trace

def test_query_pairs_are_the_traces_q_and_q_rot(trace):
    layer, head = trace.num_layers - 1, trace.num_heads - 1
    half = trace.config.head_dim // 2
    for m in (0, trace.n_tokens // 2, trace.n_tokens - 1):
        pairs = pos.query_pairs(trace, layer, head, m)
        q, q_rot = trace.layers[layer].q[head, m], trace.layers[layer].q_rot[head, m]
        np.testing.assert_array_equal(pairs.before[:, 0], q[:half])
        np.testing.assert_array_equal(pairs.before[:, 1], q[half:])
        np.testing.assert_array_equal(pairs.after[:, 0], q_rot[:half])
        np.testing.assert_array_equal(pairs.after[:, 1], q_rot[half:])
        np.testing.assert_allclose(pairs.angle, m * pairs.frequency, rtol=1e-12)


def test_the_runners_rotation_turns_each_pair_by_m_theta(trace):
    pairs = pos.query_pairs(trace, 0, 0, trace.n_tokens - 1)
    visible = pairs.length > 1e-3  # a near-zero pair has no direction to measure
    gap = circular_gap(pairs.measured_angle[visible], pairs.angle[visible])
    assert gap.max() < 1e-3
    after_length = np.hypot(pairs.after[:, 0], pairs.after[:, 1])
    np.testing.assert_allclose(after_length, pairs.length, rtol=1e-5, atol=1e-6)


def test_trail_at_the_tokens_own_position_is_its_rotated_pair(trace):
    pairs = pos.query_pairs(trace, 0, 1, trace.n_tokens - 1)
    for i in range(len(pairs.angle)):
        trail = pos.pair_trail(pairs, np.arange(trace.n_tokens), i)
        np.testing.assert_allclose(trail[pairs.position], pairs.after[i], atol=1e-5)
        np.testing.assert_allclose(trail[0], pairs.before[i], atol=1e-12)  # position 0 does not turn


# ---------------------------------------------------------------- the relative-position property

def test_dot_product_is_unchanged_when_query_and_key_move_together(trace):
    m, n = trace.n_tokens - 1, max(0, trace.n_tokens - 5)
    demo = pos.relative_demo(trace, 1, 2, m, n)
    assert demo.shifts[0] == -n and demo.shifts[-1] == trace.config.max_position_embeddings - 1 - m
    assert np.ptp(demo.dot_shift_both) < 1e-5
    assert np.ptp(demo.dot_shift_query) > 1e-3  # moving only one of them changes the distance and the dot


def test_demo_agrees_with_the_runners_own_scores(trace):
    layer, head = 1, 0
    m, n = trace.n_tokens - 1, trace.n_tokens // 3
    demo = pos.relative_demo(trace, layer, head, m, n)
    scale = np.sqrt(trace.config.head_dim)
    assert demo.runner_dot == pytest.approx(float(trace.layers[layer].scores[head, m, n]) * scale, rel=1e-4, abs=1e-4)
    assert demo.dot_at_shift(0) == pytest.approx(demo.runner_dot, rel=1e-4, abs=1e-4)
    assert demo.dot_by_distance[demo.distance] == pytest.approx(demo.dot_at_shift(0), abs=1e-9)


def test_dot_by_distance_matches_every_real_query_key_pair_at_that_distance(trace):
    layer, head = 0, 1
    lt = trace.layers[layer]
    m, n = trace.n_tokens - 1, 0
    demo = pos.relative_demo(trace, layer, head, m, n)
    # The same q and k placed at (d, 0) for every d: check against a direct float64 rotation.
    for d in (0, 1, 5, trace.config.max_position_embeddings - 1):
        direct = pos.rotated_dot(lt.q[head, m], lt.k[head, n], np.array([d + 3]), np.array([3]),
                                 trace.config.rope_theta)[0]
        assert demo.dot_by_distance[d] == pytest.approx(direct, abs=1e-9)


def test_example_shifts_start_at_the_real_positions_and_stay_in_range(trace):
    demo = pos.relative_demo(trace, 0, 0, trace.n_tokens - 1, 0)
    shifts = demo.example_shifts()
    assert shifts[0] == 0 and len(set(shifts)) == len(shifts)
    assert all(demo.shifts[0] <= s <= demo.shifts[-1] for s in shifts)


@pytest.mark.parametrize("scaling", [
    (("factor", 4.0), ("rope_type", "linear")),
    (("factor", 8.0), ("high_freq_factor", 4.0), ("low_freq_factor", 1.0),
     ("original_max_position_embeddings", 16), ("rope_type", "llama3")),
], ids=["linear", "llama3"])
def test_a_scaled_ropes_pairs_turn_as_the_model_turned_them(make_bundle, scaling):
    bundle = make_bundle(seed=3, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0,
                         rope_scaling=scaling)
    trace = analyse(NumpyRunner(bundle), "The cat sat on the mat, and the cat sat again.")
    m = trace.n_tokens - 1
    pairs = pos.query_pairs(trace, 1, 2, m)
    turned = pos.rotate(trace.layers[1].q[2, m][None].astype(np.float64), pairs.angle[None])[0]
    np.testing.assert_allclose(turned, trace.layers[1].q_rot[2, m], atol=1e-5)
    demo = pos.relative_demo(trace, 0, 1, m, 2)
    assert demo.dot_at_shift(0) == pytest.approx(demo.runner_dot, abs=1e-4)


# ---------------------------------------------------------------- the frozen views the Positions tabs draw, with their CSV

def csv_rows(text: str) -> list[list[str]]:
    import csv
    import io

    return list(csv.reader(io.StringIO(text)))


def test_sinusoidal_view_holds_the_table_and_smooth_curves_through_it():
    view = pos.sinusoidal_view(5, 16, samples=9)
    np.testing.assert_array_equal(view.table, pos.sinusoidal_table(5, 16))
    assert view.dims == tuple(pos.sinusoidal_dims_to_show(16))
    assert view.smooth[0] == 0 and view.smooth[-1] == 4 and len(view.smooth) == 9
    np.testing.assert_allclose(view.curves[::2], view.table, atol=1e-6)   # samples 0, 2, .. fall on positions
    rows = csv_rows(view.csv())
    assert rows[0] == ["position"] + [f"dim {j}" for j in range(16)]
    np.testing.assert_array_equal(np.array(rows[1:])[:, 1:].astype(np.float32), view.table)


@pytest.mark.parametrize("scaled", [False, True])
def test_embed_plus_pe_view_adds_the_table_to_the_runs_embedding(trace, scaled):
    view = pos.embed_plus_pe_view(trace, scaled)
    factor = np.sqrt(trace.config.hidden_size) if scaled else 1.0
    assert view.factor == pytest.approx(factor)
    np.testing.assert_allclose(view.embedding, trace.embed * factor, rtol=1e-6)
    np.testing.assert_allclose(view.summed - view.embedding, pos.sinusoidal_table(*trace.embed.shape), atol=1e-5)
    assert view.labels[0] == f"0 {trace.label(0)}" and len(view.labels) == trace.n_tokens
    assert view.limit >= np.abs(view.summed).max()
    assert view.rms_pe == pytest.approx(float(np.sqrt(np.mean(pos.sinusoidal_table(*trace.embed.shape) ** 2))),
                                        rel=1e-4)
    summed, embedding = csv_rows(view.csv()), csv_rows(view.embedding_csv())
    assert ("×√D" in summed[0][0]) == scaled
    assert [r[0] for r in summed[1:]] == list(view.labels)
    np.testing.assert_array_equal(np.array(embedding[1:])[:, 1:].astype(np.float32), view.embedding)


def test_pair_angle_view_is_m_theta_and_breaks_its_lines_where_they_wrap(trace):
    cfg = trace.config
    view = pos.pair_angle_view(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, cfg.max_position_embeddings)
    positions = np.arange(cfg.max_position_embeddings)
    np.testing.assert_allclose(view.angles, positions[:, None] * view.frequency[None, :])
    assert view.wrapped.min() >= 0 and view.wrapped.max() < 2 * np.pi
    wrapped_past = np.diff(view.wrapped, axis=0) < 0
    np.testing.assert_array_equal(~view.wrap_breaks[:-1], wrapped_past)
    assert view.wrap_breaks[-1].all()
    rows = csv_rows(view.csv())
    assert len(rows) == cfg.max_position_embeddings + 1 and rows[0][0] == "position m"


def test_rope_pairs_and_relative_demo_csv_carry_the_runners_numbers(trace):
    m = trace.n_tokens - 1
    pairs = pos.query_pairs(trace, 1, 2, m)
    rows = csv_rows(pairs.csv())
    assert len(rows) == trace.config.head_dim // 2 + 1
    half = trace.config.head_dim // 2
    assert float(rows[1][9]) == float(trace.layers[1].q_rot[2, m, 0])
    assert float(rows[1][10]) == float(trace.layers[1].q_rot[2, m, half])
    demo = pos.relative_demo(trace, 1, 2, m, 0)
    demo_rows = csv_rows(demo.csv())
    assert demo_rows[-1][0] == "runner q_rot.k_rot" and float(demo_rows[-1][5]) == demo.runner_dot
    assert sum(r[0] == "shift both" for r in demo_rows) == len(demo.shifts)


def drawn_at(line: pos.WrappedLine, m: float) -> list[float]:
    """The angles the drawn polyline has at position m: one, or two where it breaks (2π, then 0)."""
    values = []
    for i in range(len(line.positions) - 1):
        a, b = line.positions[i], line.positions[i + 1]
        if line.connect[i] and a <= m <= b:
            t = 0.0 if b == a else (m - a) / (b - a)
            values.append(line.angles[i] + t * (line.angles[i + 1] - line.angles[i]))
    return values


@pytest.mark.parametrize("frequency", [1.0, 0.37, np.pi / 2, 1e-4])   # π/2: wraps land on whole positions
def test_the_wrapped_line_goes_through_m_theta_at_every_integer_position(frequency):
    end = 40
    line = pos.wrapped_line(frequency, end)
    assert line.positions[0] == 0 and line.positions[-1] == end
    assert np.all(np.diff(line.positions) >= 0) and line.angles.min() >= 0 and line.angles.max() <= 2 * np.pi
    for m in range(end + 1):
        values = drawn_at(line, m)
        assert values, f"nothing drawn at position {m}"
        assert circular_gap(values, m * frequency).max() < 1e-9, (m, values)
    turns = int(frequency * end // (2 * np.pi))
    assert len(line.positions) <= 2 * turns + 2   # its corners only: two points a turn


def test_the_wrapped_line_breaks_only_where_it_wraps():
    line = pos.wrapped_line(1.0, 20)
    broken = np.flatnonzero(~line.connect[:-1])
    np.testing.assert_allclose(line.angles[broken], 2 * np.pi)
    np.testing.assert_allclose(line.angles[broken + 1], 0.0, atol=1e-12)
    np.testing.assert_allclose(line.positions[broken], 2 * np.pi * np.arange(1, len(broken) + 1))
