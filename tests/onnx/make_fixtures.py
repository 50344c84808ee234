"""Write the small ONNX graphs the embedding tests load (needs the `onnx` package, the `model`
extra; the graphs are committed, so the tests do not):

    python tests/onnx/make_fixtures.py

- exported.onnx: shaped like a Hugging Face export of a sentence model (inputs input_ids,
  attention_mask, token_type_ids; output per token, (1, n, 4)): each token's row of a 4-wide
  table, so a text's vector is the mean of its tokens' rows.
- prod_is_nan.onnx: the same, but the row of "prod" holds NaN (a model that answers NaN for
  some texts only).
- all_nan.onnx: the same, every row NaN (refused at load).
- per_length.onnx: answers (1, n), one number per token: no fixed width (refused at load).
- pixels.onnx: a graph that takes something else (an image), to be refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = Path(__file__).resolve().parent
TOKENS = 8  # the vocabulary of tests/onnx/vocab.txt


def table() -> np.ndarray:
    """Token i's row: one-hot on i % 4, scaled by 1 + i // 4."""
    rows = np.zeros((TOKENS, 4), np.float32)
    for i in range(TOKENS):
        rows[i, i % 4] = 1 + i // 4
    return rows


def exported(name: str = "exported.onnx", rows: np.ndarray | None = None) -> None:
    rows = table() if rows is None else rows
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["gathered"]),
            # the mask and types take part, as in an export: times 1, plus 0
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["mask", "last"], ["mask3"]),
            helper.make_node("Mul", ["gathered", "mask3"], ["masked"]),
            helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["types", "last"], ["types3"]),
            helper.make_node("Add", ["masked", "types3"], ["last_hidden_state"]),
        ],
        "exported",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, [1, "n"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "n", 4])],
        [numpy_helper.from_array(rows, "table"), numpy_helper.from_array(np.array([2]), "last")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(HERE / name))


def per_length() -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["out"], to=TensorProto.FLOAT)],
        "per_length",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "n"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(HERE / "per_length.onnx"))


def pixels() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["pixels"], ["out"])],
        "pixels",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(HERE / "pixels.onnx"))


if __name__ == "__main__":
    exported()
    nan_prod = table()
    nan_prod[6] = np.nan  # "prod"
    exported("prod_is_nan.onnx", nan_prod)
    exported("all_nan.onnx", np.full_like(table(), np.nan))
    per_length()
    pixels()
    (HERE / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\ndeploy\nstaging\nprod\n##s\n")
