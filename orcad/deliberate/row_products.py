"""A prompt's cosines with every stored vector: the one product each recall makes with the
deliberate records' vectors (and with the reference prompts' behind its gate).

Two forms, one interface (`scores`):
- `FloatRows`: the vectors as float32 rows, multiplied by numpy (any model), only inside the
  spans a search may see;
- `Int8Rows`: the vectors as int8 rows with one scale each, multiplied by onnxruntime's
  `DynamicQuantizeMatMul` with the rows packed once for its int8 kernels, every row at once
  (`SpannedInt8Rows`: in a few such products, by span).
  For a model that runs on onnxruntime anyway (the built-in one), 10k vectors of 384 take
  7.4 MiB in the session (its copy and its packed one) instead of 14.6 MiB, and a product
  takes about a third of the time once the model's run has pushed the rows out of the CPU's
  cache. Cosines differ from float32's by at most about 0.005.

The rows use 7 bits (-63..63), as onnxruntime's `reduce_range`: the query is quantized to
unsigned 8 bits, and on x86 CPUs without VNNI the int8 kernels add pairs of products in 16
bits (VPMADDUBSW), which saturate for full-range weights (255 * 127 * 2 > 32767); with 7 bits
they cannot (255 * 63 * 2 = 32130).

The int8 product is a one-node ONNX graph whose initializers are the rows. It is written here
as protobuf bytes (the `onnx` package is a build-time extra, and the graph is small), with the
field numbers of onnx.proto named below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]
INT8_MAX = 63  # 7 bits: see the module docstring
SPAN_PRODUCT_ROWS = 4096  # a span of this many rows or more gets a product of its own

# onnx.proto: TensorProto.DataType
_FLOAT, _INT8 = 1, 3
_IR_VERSION = 8  # readable by onnxruntime 1.14 and later
_OPSET = 17


class RowProducts(Protocol):
    rows: int
    dims: int

    def scores(self, query: Array, spans: Sequence[tuple[int, int]]) -> Array:
        """The cosines of `query` with every row; only rows inside `spans` (some of the spans
        the rows were grouped in, [start, end)) are meant to be read (a form may leave the
        others uncomputed)."""
        ...


class FloatRows:
    def __init__(self, matrix: Array) -> None:
        self.matrix = matrix
        self.rows, self.dims = int(matrix.shape[0]), int(matrix.shape[1])

    def scores(self, query: Array, spans: Sequence[tuple[int, int]]) -> Array:
        out = np.full(self.rows, -np.inf, dtype=np.float32)
        for start, end in spans:
            out[start:end] = self.matrix[start:end] @ query
        return out


def quantize_rows(matrix: Array) -> tuple[npt.NDArray[np.int8], Array]:
    """Each row as int8 codes within +-INT8_MAX and its scale (code * scale ~ value); a zero
    row has scale 1."""
    peak = np.abs(matrix).max(axis=1) if len(matrix) else np.zeros(0, dtype=np.float32)
    scale = np.where(peak > 0, peak / INT8_MAX, 1.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / scale[:, None]), -INT8_MAX, INT8_MAX).astype(np.int8)
    return codes, scale


def onnxruntime_session(model: str | bytes) -> Any:
    """An onnxruntime session of `model` (a path or the graph's bytes) as orcad runs every
    graph: on the calling thread alone (recall's products are small; see
    orcad.recall.embedding.limit_blas_threads), silent but for fatal errors (the others come
    back as exceptions), and without a memory arena, which would keep the largest buffers it
    ever held (a 128-token text's activations)."""
    import onnxruntime  # type: ignore[import-untyped]  # noqa: PLC0415 (only with an ONNX model)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    options.enable_cpu_mem_arena = False
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class Int8Rows:
    """Rows given as int8 codes and scales (`quantize_rows`), multiplied by onnxruntime. Only
    the session keeps them (as given and packed for its kernels)."""

    def __init__(self, codes: npt.NDArray[np.int8], scale: Array) -> None:
        self.rows, self.dims = int(codes.shape[0]), int(codes.shape[1])
        self._session: Any = None
        if not self.rows:
            return
        self._session = onnxruntime_session(product_graph(codes, scale))

    def scores(self, query: Array, spans: Sequence[tuple[int, int]]) -> Array:
        del spans  # every row: one product is cheaper than one per span
        if self._session is None:
            return np.zeros(0, dtype=np.float32)
        query_row = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dims)
        out: Array = self._session.run(["y"], {"q": query_row})[0][0]
        return out


class SpannedInt8Rows:
    """Int8 rows in spans (each workspace's rows, the global records'), each span of at least
    SPAN_PRODUCT_ROWS rows in a product of its own and the smaller ones together in one, so
    that a search multiplies only the products holding the spans it may see: in a database of
    one large workspace and others, a session of another does not pay for the large one. (A
    product per span would cost about 0.36 MiB each, too much for many small workspaces.)
    Rows outside the products multiplied are left at -inf."""

    def __init__(
        self, codes: npt.NDArray[np.int8], scale: Array, spans: Sequence[tuple[int, int]]
    ) -> None:
        self.rows, self.dims = int(codes.shape[0]), int(codes.shape[1])
        ordered = sorted(spans)
        if [start for start, _end in ordered[1:]] != [end for _start, end in ordered[:-1]] or (
            ordered and (ordered[0][0], ordered[-1][1]) != (0, self.rows)
        ):
            raise ValueError(f"spans {ordered} do not cover {self.rows} rows in turn")
        self._large = [
            (start, end, Int8Rows(codes[start:end], scale[start:end]))
            for start, end in ordered
            if end - start >= SPAN_PRODUCT_ROWS
        ]
        small = [(start, end) for start, end in ordered if end - start < SPAN_PRODUCT_ROWS]
        self._small_spans = frozenset(small)
        self._small_rows = np.concatenate(
            [np.arange(start, end) for start, end in small] or [np.zeros(0, dtype=np.intp)]
        )
        self._small = Int8Rows(codes[self._small_rows], scale[self._small_rows])

    def scores(self, query: Array, spans: Sequence[tuple[int, int]]) -> Array:
        out = np.full(self.rows, -np.inf, dtype=np.float32)
        wanted = set(spans)
        for start, end, product in self._large:
            if (start, end) in wanted:
                out[start:end] = product.scores(query, ())
        if self._small.rows and not wanted.isdisjoint(self._small_spans):
            out[self._small_rows] = self._small.scores(query, ())
        return out


# protobuf, as far as this graph needs it: varints and length-delimited fields


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _number(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def _tensor(name: str, data_type: int, dims: Sequence[int], raw: bytes) -> bytes:
    # TensorProto: dims 1, data_type 2, name 8, raw_data 9
    return (
        b"".join(_number(1, d) for d in dims)
        + _number(2, data_type)
        + _text(8, name)
        + _bytes(9, raw)
    )


def _value_info(name: str, data_type: int, dims: Sequence[int]) -> bytes:
    # ValueInfoProto: name 1, type 2; TypeProto: tensor_type 1; TypeProto.Tensor: elem_type 1,
    # shape 2; TensorShapeProto: dim 1; Dimension: dim_value 1
    shape = b"".join(_bytes(1, _number(1, d)) for d in dims)
    tensor_type = _number(1, data_type) + _bytes(2, shape)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def product_graph(codes: npt.NDArray[np.int8], scale: Array) -> bytes:
    """y[1, rows] = q[1, dims] @ (codes * scale).T as a serialized ONNX model."""
    rows, dims = codes.shape
    columns = np.ascontiguousarray(codes.T)  # B is [dims, rows]: one scale per column
    # NodeProto: input 1, output 2, name 3, op_type 4, domain 7
    node = (
        _text(1, "q")
        + _text(1, "B")
        + _text(1, "s")
        + _text(2, "y")
        + _text(3, "product")
        + _text(4, "DynamicQuantizeMatMul")
        + _text(7, "com.microsoft")
    )
    # GraphProto: node 1, name 2, initializer 5, input 11, output 12
    graph = (
        _bytes(1, node)
        + _text(2, "row_products")
        + _bytes(5, _tensor("B", _INT8, (dims, rows), columns.tobytes()))
        + _bytes(5, _tensor("s", _FLOAT, (rows,), scale.astype("<f4").tobytes()))
        + _bytes(11, _value_info("q", _FLOAT, (1, dims)))
        + _bytes(12, _value_info("y", _FLOAT, (1, rows)))
    )
    # ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (domain 1, version 2)
    return (
        _number(1, _IR_VERSION)
        + _text(2, "orcad")
        + _bytes(7, graph)
        + _bytes(8, _number(2, _OPSET))
        + _bytes(8, _text(1, "com.microsoft") + _number(2, 1))
    )
