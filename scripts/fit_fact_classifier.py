"""Fit the offline extractor's fact classifier on its labelled sentences and store it beside
them, for the built-in embedding model (the only one it reads).

Reads orcad/providers/fact_sentences.tsv and, as sentences that state no fact, recall's
reference prompts (orcad/recall/unrelated_prompts.txt, project_prompts.txt); embeds each with
the built-in model as the extractor reads it (fillers and lead-ins left out), fits the
regressions of orcad/providers/fact_classifier.py and writes fact_classifier.npz beside them,
with the digest of what the fit depends on (the model's id, the sentences and prompts, the
constants). A test fails while the stored file is out of date: run this after changing any of
them (the gate's reference prompts included) or the built-in model. It takes about five
minutes on two cores.

    python scripts/fit_fact_classifier.py
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as `python scripts/fit_fact_classifier.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.providers import fact_classifier
from orcad.recall.local_models import BUILTIN_DIR, load_onnx


def main() -> None:
    model = load_onnx(BUILTIN_DIR)
    rows = fact_classifier.training_rows()
    started = time.monotonic()
    vectors = model.embed([fact_classifier.training_text(sentence) for _label, sentence in rows])
    digest = fact_classifier.classifier_digest(model.model_id, rows)
    classifier = fact_classifier.fit(model.model_id, rows, vectors, digest)
    classifier.save()
    labels = Counter(label for label, _sentence in rows)
    print(
        f"fitted on {len(rows)} sentences ({', '.join(f'{n} {k}' for k, n in labels.items())}; "
        f"{len(classifier.vocabulary)} word features) in {time.monotonic() - started:.1f} s; "
        f"wrote {fact_classifier.CLASSIFIER_FILE}"
    )


if __name__ == "__main__":
    main()
