"""A BERT encoder's forward pass in numpy (inference only). Pure: no I/O.

Used to embed text with a full local sentence model (`[recall] embedding = "<model dir>"`) and
by scripts/build_static_embedding.py to distil the built-in static model from one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]


def erf(x: Array) -> Array:
    """Abramowitz & Stegun 7.1.26 (error < 1.5e-7): BERT's GELU is the exact erf form."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    result: Array = sign * (1.0 - poly * np.exp(-a * a))
    return result


def layer_norm(x: Array, weight: Array, bias: Array, eps: float = 1e-12) -> Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    result: Array = (x - mean) / np.sqrt(var + eps) * weight + bias
    return result


def forward(w: Mapping[str, Array], ids: npt.NDArray[np.int64], heads: int) -> Array:
    """Last hidden states (batch, length, hidden) for rows of token ids of equal length.

    `w` holds the Hugging Face BertModel tensors by name (without a "bert." prefix).
    """
    batch, length = ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length][None]
        + w["embeddings.token_type_embeddings.weight"][0][None, None]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    hidden = x.shape[-1]
    size = hidden // heads
    layer = 0
    while f"encoder.layer.{layer}.attention.self.query.weight" in w:
        p = f"encoder.layer.{layer}."

        def dense(v: Array, name: str, p: str = p) -> Array:
            out: Array = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            return out

        def split(v: Array) -> Array:
            return v.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (split(dense(x, "attention.self." + n)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size))
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = layer_norm(
            x + dense(context, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        inner = dense(x, "intermediate.dense")
        inner = 0.5 * inner * (1.0 + erf(inner / np.float32(np.sqrt(2.0))))
        x = layer_norm(
            x + dense(inner, "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
        layer += 1
    return x
