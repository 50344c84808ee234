"""Fit the unrelated-prompt classifier of a shipped model ahead of time, so that the daemon
loads it instead of fitting it at every start (about two seconds of CPU, and for the built-in
transformer five more to embed the reference prompts).

Writes `gate.npz` into the model directory (both shipped models by default): the classifier's
weights, bias and word features, with the digest of what the fit depends on (the model's id,
orcad/recall/unrelated_prompts.txt and project_prompts.txt, the fit's constants), and for a
model that is not static the reference prompts' vectors (float16). The daemon uses the file
only while that digest matches, and fits its own otherwise; a test fails while a shipped
model's file is out of date. Run it after changing either prompt file or a model
(scripts/build_onnx_model.py and scripts/build_static_embedding.py run it):

    python scripts/fit_gate.py [--model DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python scripts/fit_gate.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.recall.embedding import load_embedder
from orcad.recall.local_models import BUILTIN_DIR, STATIC_DIR, StaticEmbedder
from orcad.recall.prompt_gate import (
    GATE_FILE,
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    GateReferences,
    gate_digest,
    read_prompts,
    write_fitted_gate,
)


def fit_gate(directory: Path) -> Path:
    """Fit the classifier for the model in `directory` and store it there."""
    model = load_embedder(str(directory))
    assert model is not None
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    started = time.monotonic()
    references = GateReferences(model.embed(texts[0]), model.embed(texts[1]), texts)
    path = directory / GATE_FILE
    write_fitted_gate(
        path,
        references,
        gate_digest(model.model_id, texts),
        with_vectors=not isinstance(model, StaticEmbedder),  # a static model's take no time
    )
    print(
        f"fitted on {len(texts[0])} + {len(texts[1])} reference prompts "
        f"({len(references.vocabulary)} word features) in {time.monotonic() - started:.1f} s; "
        f"wrote {path}"
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", type=Path, action="append", help="a model directory (default: both shipped)"
    )
    for directory in parser.parse_args().model or (BUILTIN_DIR, STATIC_DIR):
        fit_gate(directory)


if __name__ == "__main__":
    main()
