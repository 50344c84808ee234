"""The product of a prompt's vector with the stored vectors (orcad/deliberate/row_products.py):
int8 rows run by onnxruntime agree with float32 rows in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from orcad.deliberate import row_products
from orcad.deliberate.row_products import FloatRows, Int8Rows, SpannedInt8Rows, quantize_rows

pytestmark = pytest.mark.inprocess


def unit_rows(count: int, dims: int, seed: int = 7) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dims)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_int8_rows_give_the_float_cosines_within_their_precision() -> None:
    matrix = unit_rows(2000, 384)
    matrix[17] = 0.0  # a text without meaning embeds as a zero row
    query = unit_rows(1, 384, seed=8)[0]
    exact = matrix @ query
    every = [(0, len(matrix))]
    approximate = Int8Rows(*quantize_rows(matrix)).scores(query, every)
    assert approximate.dtype == np.float32 and approximate.shape == exact.shape
    assert np.abs(approximate - exact).max() < 5e-3
    assert approximate[17] == 0.0
    assert np.array_equal(FloatRows(matrix).scores(query, every), exact)
    nearest = set(np.argsort(-exact)[:10].tolist())
    assert len(nearest & set(np.argsort(-approximate)[:12].tolist())) == 10


def test_float_rows_compute_only_the_spans_asked_for() -> None:
    matrix = unit_rows(10, 4)
    query = unit_rows(1, 4, seed=3)[0]
    scores = FloatRows(matrix).scores(query, [(0, 2), (6, 10)])
    assert np.allclose(scores[[0, 1, 6, 7, 8, 9]], (matrix @ query)[[0, 1, 6, 7, 8, 9]])
    assert np.isneginf(scores[2:6]).all()


def test_no_rows_give_no_scores() -> None:
    empty = np.zeros((0, 8), dtype=np.float32)
    assert Int8Rows(*quantize_rows(empty)).scores(np.ones(8, dtype=np.float32), []).shape == (0,)


def test_quantized_rows_keep_their_sign_and_scale() -> None:
    matrix = np.array([[1 / 3, -1.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    codes, scale = quantize_rows(matrix)
    assert codes.tolist() == [[21, -63, 0], [0, 0, 0]]  # 7 bits: no 16-bit saturation
    assert scale.tolist() == pytest.approx([1 / 63, 1.0])


def test_spanned_rows_multiply_only_the_products_holding_the_spans_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(row_products, "SPAN_PRODUCT_ROWS", 40)
    matrix = unit_rows(130, 384)
    query = unit_rows(1, 384, seed=5)[0]
    exact = matrix @ query
    # global rows, one large workspace, two small ones: the small two share one product
    spans = [(0, 10), (10, 100), (100, 120), (120, 130)]
    rows = SpannedInt8Rows(*quantize_rows(matrix), spans)
    small = rows.scores(query, [(0, 10), (120, 130)])
    assert np.isneginf(small[10:100]).all()  # the large workspace's product was not run
    computed = np.r_[0:10, 100:130]
    assert np.abs(small[computed] - exact[computed]).max() < 5e-3
    large = rows.scores(query, [(10, 100)])
    assert np.abs(large[10:100] - exact[10:100]).max() < 5e-3
    assert np.isneginf(large[np.r_[0:10, 100:130]]).all()
    every = rows.scores(query, spans)
    assert np.abs(every - exact).max() < 5e-3
    with pytest.raises(ValueError, match="do not cover"):
        SpannedInt8Rows(*quantize_rows(matrix), [(0, 10), (20, 130)])
    empty = SpannedInt8Rows(*quantize_rows(np.zeros((0, 384), dtype=np.float32)), [])
    assert empty.scores(query, []).shape == (0,)
