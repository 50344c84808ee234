"""Recall's embedding models: the tokenizer, the built-in ONNX sentence model, the shipped
static model, a local BERT model directory, an OpenAI-compatible endpoint (a real loopback
server), and the failures that leave recall lexical."""

from __future__ import annotations

import copy
import gc
import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orcad.limits import (
    EMBEDDING_COOLDOWN_MAX_S,
)
from orcad.recall import embedders, embedding, endpoint_embedder, local_models, prompt_gate
from orcad.recall.breaker import EndpointBreaker
from orcad.recall.embedders import (
    DEFAULT_FLOOR,
    DEFAULT_GATE,
    PURPOSES,
    EmbeddingRefused,
    EmbeddingTimedOut,
    EmbeddingUnavailable,
    normalize_rows,
)
from orcad.recall.embedding import Embeddings, load_embedder
from orcad.recall.endpoint_embedder import EndpointEmbedder
from orcad.recall.local_models import BUILTIN_DIR, STATIC_DIR, OnnxEmbedder, load_static
from orcad.recall.prompt_gate import (
    GATE_FILE,
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    GateReferences,
    gate_digest,
    gate_references,
    read_fitted_gate,
    read_prompts,
    word_features,
)
from orcad.recall.wordpiece import WordPiece, basic_words
from tests.fake_openai import (
    FakeOpenAI,
    endless_body,
    junk,
    stall_before_headers,
    status,
    trickled_body,
    trickled_headers,
)
from tests.harness import REPO_ROOT

pytestmark = pytest.mark.inprocess

# token ids from the reference BERT tokenizer (Hugging Face `tokenizers`) over the same vocab
REFERENCE = [
    ("Customers get 429s!", [6304, 2131, 4413, 2683, 2015, 999]),
    (
        "Café naïve — SOURCE_DATE_EPOCH=1",
        [7668, 15743, 1517, 3120, 1035, 3058, 1035, 25492, 1027, 1015],
    ),
    ("pnpm vs npm", [1052, 16275, 2213, 5443, 27937, 2213]),
    ("中文 deploys", [1746, 1861, 21296, 2015]),
]


@pytest.fixture(scope="module")
def builtin() -> Any:
    model = load_embedder("builtin")
    assert model is not None
    return model


@pytest.fixture(scope="module")
def static() -> Any:
    return load_static(STATIC_DIR)


def test_wordpiece_splits_as_bert_does(builtin: Any) -> None:
    for text, ids in REFERENCE:
        assert builtin.tokens.encode(text) == ids, text
    assert basic_words("a,b  c\u200b") == ["a", ",", "b", "c"]  # format characters dropped
    assert builtin.tokens.encode("x" * 101) == [builtin.tokens.unknown_id]


def test_wordpiece_unknown_piece_makes_the_word_unknown() -> None:
    pieces = WordPiece(["[UNK]", "ab", "##c"])
    assert pieces.encode("abc abd") == [1, 2, 0]


def _greedy_reference(pieces: WordPiece, word: str) -> tuple[int, ...]:
    """BERT's longest-match-first split, trying every end of the word (no length bound)."""
    if len(word) > 100:
        return (pieces.unknown_id,)
    found, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in pieces.ids:
                found.append(pieces.ids[piece])
                start = end
                break
        else:
            return (pieces.unknown_id,)
    return tuple(found)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(
        alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz0123456789 .,-_'é日\u200b\n"))
        | st.characters(),
        max_size=400,
    ),
    limit=st.integers(min_value=0, max_value=40),
)
def test_wordpiece_with_a_limit_gives_the_first_ids_and_splits_as_without_bound(
    builtin: Any, text: str, limit: int
) -> None:
    tokens = builtin.tokens
    assert tokens.encode(text, limit) == tokens.encode(text)[:limit]
    for word in basic_words(text):
        assert tokens.word_ids(word) == _greedy_reference(tokens, word), word


def test_wordpiece_finds_the_longest_pieces_of_its_vocabulary(builtin: Any) -> None:
    tokens = builtin.tokens
    longest = sorted(tokens.ids, key=lambda t: -len(t.removeprefix("##")))[:40]
    for token in longest:
        piece = token.removeprefix("##")
        for word in (piece, "a" + piece, piece + "s", "un" + piece + "ing"):
            assert tokens.word_ids(word) == _greedy_reference(tokens, word), word


def test_a_pasted_megabyte_costs_what_its_first_words_do(builtin: Any) -> None:
    # a log of digests: every word new, each a long search in the vocabulary
    lines = [f"layer sha256:{n:064x} pulled" for n in range(12_000)]
    pasted = "\n".join(lines) + " and then zzq" + "q" * 500
    tokens = WordPiece(list(builtin.tokens.ids))  # its own cache
    looked_up: list[str] = []
    split = tokens.word_ids

    def counting(word: str) -> tuple[int, ...]:
        looked_up.append(word)
        return split(word)

    tokens.word_ids = counting  # type: ignore[method-assign]
    ids = tokens.encode(pasted, embedders.MAX_TOKENS)
    assert len(ids) == embedders.MAX_TOKENS
    assert len(looked_up) <= embedders.MAX_TOKENS  # each word gives at least one id
    assert builtin.embed([pasted]).shape == (1, builtin.dims)
    # words longer than BERT's limit are one unknown id and are never kept in the cache
    tokens.encode("x" * 5_000 + " " + "y" * 101)
    assert all(len(word) <= 100 for word in tokens._cache)


def test_a_long_text_that_is_not_ascii_is_read_for_its_first_64k_characters(builtin: Any) -> None:
    question = " why does the deploy to staging fail?"
    ascii_blob, accented_blob = "f" * 70_000, "\u00e9" * 70_000
    # ASCII is split by a regular expression: a long blob costs nothing, the question counts
    assert builtin.embed([ascii_blob + question])[0].any()
    assert np.allclose(
        builtin.embed([ascii_blob + question]), builtin.embed(["f" * 101 + question])
    )
    # other text is read for its first EMBED_READ_CHARS characters: here only the blob (one
    # unknown token), so a pasted megabyte of one word costs what 64k characters do
    cut = builtin.embed([accented_blob + question])
    assert np.allclose(cut, builtin.embed([accented_blob]))


def test_builtin_model_embeds_unit_vectors_and_ranks_meaning(builtin: Any) -> None:
    vectors = builtin.embed(
        ["ship the release to production", "deploy to prod", "bake a chocolate cake", ""]
    )
    assert vectors.shape == (4, builtin.dims) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert not vectors[3].any()  # no tokens: a zero row, cosine 0 with everything
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert builtin.model_id.startswith("minilm-l6-int8-") and builtin.dims == 384
    assert 0 < builtin.floor < 1 and builtin.lexical_weight >= 0
    assert builtin.unrelated_weight > 0  # calibrated with the unrelated prompts
    # a prompt surely about the project meets only the floor; one surely about nothing stored
    # needs more than the floor, and less than the best relevance there can be
    surely_unrelated = builtin.gate + builtin.unrelated_weight
    assert builtin.gate < builtin.floor < surely_unrelated < 1 + builtin.lexical_weight


def test_a_prompt_like_the_unrelated_ones_must_clear_a_higher_gate(builtin: Any) -> None:
    # the built-in model sets no lexical gate (calibrated, it changed nothing); one that does
    model = copy.copy(builtin)
    model.lexical_gate = 0.3
    embeddings = Embeddings("builtin", model)
    prompts = [
        "thanks, that was helpful",
        "how does a red-black tree stay balanced?",
        "which phones must the mobile app support",
    ]
    queries = [embeddings.query(prompt) for prompt in prompts]
    assert all(query is not None for query in queries)
    both = [query.gates for query in queries if query is not None]
    gates = [found.gate for found in both]
    assert min(gates[:2]) > gates[2] + 0.2, gates  # general talk needs a much closer record
    # raised by most of the unrelated weight for general talk, little for a project's own
    assert min(gates[:2]) > builtin.gate + 0.7 * builtin.unrelated_weight, gates
    assert gates[2] < builtin.gate + 0.3 * builtin.unrelated_weight, gates
    # the lexical gate rises by as much: "thanks" does not open it by sharing a word (the
    # project weight lowers only the gate on relevance)
    references = gate_references(model)
    assert references is not None
    for prompt, found in zip(prompts, both, strict=True):
        vector = builtin.embed([prompt])
        nearest = references.nearest(vector)
        raised = builtin.unrelated_weight * references.probability(vector, [prompt], nearest)[0]
        assert found.lexical == pytest.approx(0.3 + raised)
        lowered = builtin.project_weight * max(0.0, nearest[0, 1])
        assert found.gate == pytest.approx(builtin.gate + raised - lowered)
    project = builtin.embed(prompts[2:])[0]
    assert embeddings.gates_for(project, prompts[2]) == both[2]  # the same, asked again
    own = (builtin.gate, 0.3)  # no tokens, no vector: the model's own gates
    assert embeddings.gates_for(np.zeros(builtin.dims, np.float32), "") == own
    assert Embeddings("none", None).gates_for(project, prompts[2]) == (DEFAULT_GATE, None)
    assert Embeddings("none", None).query(prompts[2]) is None


def test_a_classifier_that_fails_leaves_recall_strict_and_says_why(
    builtin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    embeddings = Embeddings("builtin", builtin)

    def broken(*_args: Any) -> Any:
        raise ValueError("shapes do not match")

    monkeypatch.setattr(GateReferences, "probability", broken)
    query = embeddings.query("which phones must we support")
    assert query is not None and query.vector.any()
    # as for a prompt surely unrelated: only a record that fits closely is injected
    assert query.gates.gate == pytest.approx(builtin.gate + builtin.unrelated_weight)
    assert "classifier failed" in (embeddings.reason or "")


def test_the_unrelated_classifier_separates_what_it_was_fitted_on() -> None:
    rng = np.random.default_rng(7)
    centre = normalize_rows(rng.normal(size=(2, 16)).astype(np.float32))
    unrelated = normalize_rows(centre[0] + 0.3 * rng.normal(size=(200, 16)).astype(np.float32))
    project = normalize_rows(centre[1] + 0.3 * rng.normal(size=(150, 16)).astype(np.float32))
    # no words in common: the vectors decide
    references = GateReferences(unrelated, project, ([""] * 200, [""] * 150))
    assert references.weights.dtype == np.float32

    def probability(vectors: Any) -> Any:
        return references.probability(vectors, [""] * len(vectors))

    assert probability(unrelated).mean() > 0.9
    assert probability(project).mean() < 0.1
    # between the two, about even; and a probability, whatever the vector
    middle = probability(normalize_rows(centre.sum(0, keepdims=True)))[0]
    assert 0.1 < middle < 0.9
    far = probability(np.stack([1e4 * centre[0], 1e4 * centre[1]]))
    assert far[0] == pytest.approx(1.0) and far[1] == pytest.approx(0.0, abs=1e-20)
    # and prompts it was not fitted on, drawn alike (their nearest reference prompt is never
    # themselves, so the fit leaves each reference prompt out of its own nearest)
    fresh = [
        normalize_rows(c + 0.3 * rng.normal(size=(100, 16)).astype(np.float32)) for c in centre
    ]
    assert probability(fresh[0]).mean() > 0.9
    assert probability(fresh[1]).mean() < 0.1


def test_reference_vectors_kept_as_int8_rows_give_the_same_nearest_and_probability() -> None:
    rng = np.random.default_rng(11)
    unrelated = normalize_rows(rng.normal(size=(300, 384)).astype(np.float32))
    project = normalize_rows(rng.normal(size=(200, 384)).astype(np.float32))
    references = GateReferences(unrelated, project, ([""] * 300, [""] * 200))
    prompts = normalize_rows(
        np.concatenate([unrelated[:5] + 0.2 * rng.normal(size=(5, 384)), project[:5]]).astype(
            np.float32
        )
    )
    nearest = references.nearest(prompts)
    probability = references.probability(prompts, [""] * 10)
    references.keep_as_int8()
    assert np.abs(references.nearest(prompts) - nearest).max() < 3e-3
    assert np.abs(references.probability(prompts, [""] * 10) - probability).max() < 0.01
    with pytest.raises(RuntimeError, match="int8 rows only"):
        _ = references.unrelated  # gone: the float rows are not kept beside them


def test_the_builtin_model_keeps_its_reference_vectors_as_int8_rows(builtin: Any) -> None:
    references = gate_references(builtin)
    assert references is not None
    with pytest.raises(RuntimeError, match="int8 rows only"):
        _ = references.project
    static = load_embedder("static")
    assert static is not None
    kept = gate_references(static)
    assert kept is not None and len(kept.project) > 0  # numpy only: float rows


def test_the_builtin_model_serves_with_float_reference_rows_when_int8_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(*_args: object) -> None:
        raise RuntimeError("no kernel for this")

    monkeypatch.setattr(prompt_gate, "Int8Rows", refused)
    embeddings = Embeddings.load("builtin")
    assert embeddings.state == "ready", embeddings.reason
    query = embeddings.query("explain the CAP theorem")
    assert query is not None and query.gates.gate > embeddings.gate  # the classifier works


def test_the_unrelated_classifier_learns_how_a_prompt_asks_from_its_words() -> None:
    """Where the vectors cannot tell the sets apart, the words that recur in one set do."""
    rng = np.random.default_rng(11)
    vectors = normalize_rows(rng.normal(size=(240, 16)).astype(np.float32))
    topics = ["redis", "kafka", "the cache", "postgres", "docker", "the tests"]
    general = [f"explain how {topics[n % 6]} works in general" for n in range(120)]
    own = [f"where do we keep {topics[n % 6]} settings here" for n in range(120)]
    references = GateReferences(vectors[:120], vectors[120:], (general, own))
    asked = normalize_rows(rng.normal(size=(2, 16)).astype(np.float32))  # unlike any of them
    chances = references.probability(
        asked, ["explain how grpc works in general", "where do we keep grpc settings here"]
    )
    assert chances[0] > 0.9 and chances[1] < 0.1
    assert word_features("Do we use Redis?") == {
        "do",
        "we",
        "use",
        "redis",
        "do we",
        "we use",
        "use redis",
    }
    # of a pasted log, its first words only, as of its tokens
    assert "tail" not in word_features("error " * 300 + "tail")


# How far apart the built-in model's vectors of the same texts may be on two CPUs (the mean and
# the least cosine). onnxruntime's int8 products are exact with VNNI (AVX-512 or AVX); there
# the stored reference vectors (made on an AVX-512 VNNI CPU) equal this CPU's to float16
# precision. Without VNNI (vpmaddubsw: AVX2) a pair of products saturates at 16 bits:
# the reference prompts' vectors there are at mean 0.989, least 0.948 of the stored ones.
INT8_KERNELS_DIFFER = (0.98, 0.93)


@pytest.mark.parametrize("shipped_model", ["builtin", "static"])
def test_each_shipped_model_ships_its_classifier_fitted_and_current(
    shipped_model: str, request: pytest.FixtureRequest
) -> None:
    """gate.npz must be refitted (scripts/fit_gate.py) whenever the reference prompts, the
    model or the fit change: the daemon would otherwise fit its own at every start."""
    model = request.getfixturevalue(shipped_model)
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    shapes = (len(texts[0]), model.dims), (len(texts[1]), model.dims)
    shipped = read_fitted_gate(model.directory / GATE_FILE, shapes)
    assert shipped is not None, "run scripts/fit_gate.py"
    assert shipped.digest == gate_digest(model.model_id, texts), "run scripts/fit_gate.py"
    vectors = model.embed(texts[0]), model.embed(texts[1])
    if shipped_model == "builtin":  # the transformer's reference vectors come stored
        assert shipped.references is not None
        for stored, embedded in zip(shipped.references, vectors, strict=True):
            assert stored.shape == embedded.shape
            cosines = (stored * embedded).sum(axis=1) / np.linalg.norm(stored, axis=1)
            assert cosines.mean() > INT8_KERNELS_DIFFER[0], cosines.mean()
            assert cosines.min() > INT8_KERNELS_DIFFER[1], cosines.min()
        # the fit saw the stored vectors: fitted on them again, it must give the shipped one
        unrelated, project = shipped.references
        vectors = unrelated.astype(np.float32), project.astype(np.float32)
    else:  # a static model embeds them in milliseconds
        with np.load(model.directory / GATE_FILE) as stored:
            assert "unrelated" not in stored.files
    loaded = GateReferences(*vectors, texts, shipped)
    fitted = GateReferences(*vectors, texts)  # what the daemon would fit for itself
    builtin = model
    asked = [
        "explain the CAP theorem",
        "which phones must we support",
        "thanks!",
        "do we use redis",
    ]
    assert loaded.probability(builtin.embed(asked), asked) == pytest.approx(
        fitted.probability(builtin.embed(asked), asked), abs=1e-5
    )


def test_a_stale_or_damaged_fitted_classifier_is_fitted_again(static: Any, tmp_path: Path) -> None:
    directory = tmp_path / "model"
    shutil.copytree(STATIC_DIR, directory)
    expected = Embeddings("static", static).query("explain the CAP theorem")
    shipped = read_fitted_gate(STATIC_DIR / GATE_FILE)
    assert expected is not None and shipped is not None

    def flipped(data: bytes) -> bytes:
        """`data` with one byte of its compressed weights flipped, so that inflating fails."""
        for offset in range(64, len(data)):
            damaged = data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]
            try:
                with np.load(io.BytesIO(damaged)) as arrays:
                    arrays["weights"]
            except zlib.error:
                return damaged
        raise AssertionError("no flipped byte breaks the compressed weights")

    def store(path: Path, weights: Any, digest: str = shipped.digest) -> None:
        words = np.array(shipped.words)
        np.savez(path, weights=weights, bias=shipped.bias, words=words, digest=np.str_(digest))

    damaged = {
        "garbage": lambda path: path.write_bytes(b"not a zip file"),
        "missing": lambda path: path.unlink(),
        "stale": lambda path: store(path, np.zeros_like(shipped.weights), "0" * 64),
        "short": lambda path: store(path, shipped.weights[:-1]),
        "nan": lambda path: store(path, np.full_like(shipped.weights, np.nan)),
        "repeated word": lambda path: np.savez(
            path,
            weights=shipped.weights,
            bias=shipped.bias,
            words=np.array([shipped.words[0], *shipped.words[:-1]]),
            digest=np.str_(shipped.digest),
        ),
        "corrupt": lambda path: path.write_bytes(flipped(path.read_bytes())),
    }
    for name, damage in damaged.items():
        shutil.copy(STATIC_DIR / GATE_FILE, directory / GATE_FILE)
        damage(directory / GATE_FILE)
        query = Embeddings.load(str(directory)).query("explain the CAP theorem")
        assert query is not None, name
        assert query.gates.gate == pytest.approx(expected.gates.gate, abs=1e-5), name


def test_the_builtin_classifier_tells_general_talk_from_questions_about_a_project(
    builtin: Any,
) -> None:
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    references = GateReferences(builtin.embed(texts[0]), builtin.embed(texts[1]), texts)
    general = ["explain the CAP theorem", "sorry, I meant the other file", "thanks, that helped"]
    own = ["customers get 429s", "which phones must we support", "how do I deploy this repo?"]
    # each on its side of even odds (measured 0.70 and more, 0.47 and less), and every general
    # prompt above every project one; the held-out sets measure the rest (docs/recall.md)
    assert references.probability(builtin.embed(general), general).min() > 0.6
    assert references.probability(builtin.embed(own), own).max() < 0.5


def test_a_project_name_is_distinctive_and_a_word_in_general_use_is_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    embeddings = Embeddings("static", load_static(STATIC_DIR))
    terms = ["kapt", "testcontainers", "gradle", "docker", "clustering", "outofmemoryerror"]
    frequency = dict.fromkeys(terms, 1)
    # "gradle" and "docker" are named by reference prompts about something else, "clustering"
    # stems to a vocabulary word, and the error's name is in no stored text
    frequency["outofmemoryerror"] = 0
    assert embeddings.distinctive(terms, frequency) == {"kapt", "testcontainer"}
    # without the general words every word would look like a name: then none is distinctive
    monkeypatch.setattr(prompt_gate, "BUILTIN_DIR", tmp_path)
    prompt_gate.general_words.cache_clear()
    try:
        assert prompt_gate.general_words() == frozenset()
        assert embeddings.distinctive(terms, frequency) == frozenset()
    finally:
        monkeypatch.undo()
        prompt_gate.general_words.cache_clear()
    assert "gradle" in prompt_gate.general_words()


def test_the_reference_prompt_files_are_read_strictly(tmp_path: Path) -> None:
    unrelated, project = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    for shipped in (unrelated, project):
        assert len(shipped) >= 300 and len(set(shipped)) == len(shipped)
    assert not set(unrelated) & set(project)
    listed = tmp_path / "prompts.txt"
    listed.write_text("# general talk\n\n  tell me a joke  \n  # indented note\nthanks\n")
    assert read_prompts(listed) == ["tell me a joke", "thanks"]
    listed.write_text("# only a comment\n\n")
    with pytest.raises(EmbeddingUnavailable, match="holds no prompts"):
        read_prompts(listed)
    with pytest.raises(EmbeddingUnavailable, match="cannot read the reference prompts"):
        read_prompts(tmp_path / "missing.txt")
    listed.write_bytes(b"\xff\xfe bad utf-8")
    with pytest.raises(EmbeddingUnavailable, match="cannot read the reference prompts"):
        read_prompts(listed)


def tiny_static_model(directory: Path, described: str) -> Path:
    """A static model of three tokens whose vectors are all the same (MODEL.txt: `described`)."""
    directory.mkdir()
    np.savez(
        directory / "vectors.npz", codes=np.ones((3, 4), np.int8), scale=np.ones(3, np.float32)
    )
    (directory / "vocab.txt").write_text("[UNK]\na\nb\n")
    (directory / "MODEL.txt").write_text(described)
    return directory


def gate_of(embeddings: Embeddings) -> float:
    query = embeddings.query("a")
    assert query is not None
    return query.gates.gate


def test_a_model_calibrated_with_reference_prompts_does_not_load_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tiny_static_model(
        tmp_path / "static", "id: tiny\ngate: 0.1\nunrelated_weight: 0.5\n"
    )
    loaded = Embeddings.load(str(directory))
    # every text embeds to the same vector here: only the words of a prompt move it
    assert loaded.state == "ready"
    share = (gate_of(loaded) - 0.1) / 0.5  # the probability the classifier gives "a"
    (directory / "MODEL.txt").write_text("id: tiny\ngate: 0.9\nproject_weight: 0.25\n")
    lowered = Embeddings.load(str(directory))
    assert gate_of(lowered) == 0.9 - 0.25
    for name, weight in (("UNRELATED_PROMPTS", "unrelated"), ("PROJECT_PROMPTS", "project")):
        with monkeypatch.context() as patch:
            patch.setattr(prompt_gate, name, tmp_path / "gone.txt")
            (directory / "MODEL.txt").write_text(f"id: tiny\n{weight}_weight: 0.5\n")
            missing = Embeddings.load(str(directory))  # it would rank without its calibration
            assert missing.state == "unavailable" and missing.embed(["a"]) is None
            assert "cannot read the reference prompts" in (missing.reason or "")
    (directory / "MODEL.txt").write_text("id: tiny\ngate: 0.1\n")  # not calibrated with them
    plain = Embeddings.load(str(directory))
    assert plain.state == "ready" and gate_of(plain) == 0.1
    (directory / "MODEL.txt").write_text("id: tiny\ngate: -0.5\nunrelated_weight: 2\n")
    signed = Embeddings.load(str(directory))  # a negative gate, raised by the probability
    assert gate_of(signed) == pytest.approx(-0.5 + 2 * share, abs=1e-4)


def test_settings_none_missing_and_broken(tmp_path: Path) -> None:
    assert load_embedder("none") is None
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        load_embedder(str(tmp_path / "nowhere"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "vectors.npz").write_bytes(b"not a zip file")
    (broken / "vocab.txt").write_text("[UNK]\n")
    (broken / "MODEL.txt").write_text("id: x\n")
    with pytest.raises(EmbeddingUnavailable, match="cannot load the static model"):
        load_embedder(str(broken))
    loaded = Embeddings.load(str(broken))
    assert loaded.state == "unavailable" and loaded.embedder is None
    assert "cannot load the static model" in (loaded.reason or "")
    assert loaded.embed(["anything"]) is None
    assert Embeddings.load("none").state == "off"
    assert Embeddings.load("builtin").state == "ready"
    assert Embeddings.load("static").state == "ready"


def test_a_deferred_model_loads_once_and_its_users_wait_for_the_load() -> None:
    started, release = threading.Event(), threading.Event()
    loads: list[int] = []

    def slow_loader() -> Any:
        loads.append(1)
        started.set()
        release.wait(10)
        return load_static(STATIC_DIR)

    embeddings = Embeddings("static", None, loader=slow_loader)
    assert embeddings.state == "loading" and embeddings.loaded_model_id is None
    loader = threading.Thread(target=embeddings.load_blocking)
    loader.start()
    assert started.wait(10)
    answers: list[Any] = []
    user = threading.Thread(target=lambda: answers.append(embeddings.embed(["deploys"])))
    user.start()
    user.join(0.3)
    assert user.is_alive() and not answers  # a recall waits for the model, never goes lexical
    assert embeddings.state == "loading"  # while status never waits
    release.set()
    loader.join(10)
    user.join(10)
    assert answers[0] is not None and answers[0].shape == (1, load_static(STATIC_DIR).dims)
    assert embeddings.state == "ready" and embeddings.loaded_model_id == embeddings.model_id
    embeddings.load_blocking()
    assert loads == [1]


def test_a_deferred_model_that_fails_to_load_leaves_recall_lexical() -> None:
    def broken_loader() -> Any:
        raise RuntimeError("the disk said no")

    embeddings = Embeddings("builtin", None, loader=broken_loader)
    assert embeddings.embed(["anything"]) is None  # the first use loads, and fails
    assert embeddings.state == "unavailable" and "the disk said no" in (embeddings.reason or "")
    assert Embeddings.deferred("none").state == "off"
    assert Embeddings.deferred("builtin").state == "loading"


def test_static_model_with_mismatched_shapes_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "static"
    directory.mkdir()
    np.savez(
        directory / "vectors.npz", codes=np.zeros((3, 4), np.int8), scale=np.ones(3, np.float32)
    )
    (directory / "vocab.txt").write_text("[UNK]\na\n")  # two tokens for three vectors
    (directory / "MODEL.txt").write_text("id: tiny\n")
    with pytest.raises(EmbeddingUnavailable, match="disagree"):
        load_embedder(str(directory))
    (directory / "vocab.txt").write_text("[UNK]\na\nb\n")
    (directory / "MODEL.txt").write_text("id: tiny\nfloor: 0.4\nlexical_weight: 0.2\n")
    tiny = load_embedder(str(directory))
    assert tiny is not None and (tiny.model_id, tiny.floor, tiny.gate, tiny.lexical_weight) == (
        "tiny",
        0.4,
        0.4,  # no gate given: at the floor, so it changes nothing
        0.2,
    )
    (directory / "MODEL.txt").write_text("id: tiny\nfloor: 0.2\ngate: 0.5\n")
    gated = load_embedder(str(directory))
    assert gated is not None and (gated.floor, gated.gate) == (0.2, 0.5)


def write_tiny_bert(directory: Path, *, hidden: int = 8, layers: int = 2) -> None:
    """A small random BERT in the Hugging Face layout (config, vocab, safetensors)."""
    rng = np.random.default_rng(7)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "deploy", "##s", "cake", "prod"]
    shapes = {
        "embeddings.word_embeddings.weight": (len(vocab), hidden),
        "embeddings.position_embeddings.weight": (16, hidden),
        "embeddings.token_type_embeddings.weight": (2, hidden),
        "embeddings.LayerNorm.weight": (hidden,),
        "embeddings.LayerNorm.bias": (hidden,),
    }
    for n in range(layers):
        p = f"encoder.layer.{n}."
        for name in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            shapes[p + name + ".weight"] = (hidden, hidden)
            shapes[p + name + ".bias"] = (hidden,)
        shapes[p + "intermediate.dense.weight"] = (4 * hidden, hidden)
        shapes[p + "intermediate.dense.bias"] = (4 * hidden,)
        shapes[p + "output.dense.weight"] = (hidden, 4 * hidden)
        shapes[p + "output.dense.bias"] = (hidden,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + norm + ".weight"] = (hidden,)
            shapes[p + norm + ".bias"] = (hidden,)
    header: dict[str, Any] = {}
    blobs = b""
    for name, shape in shapes.items():
        data = rng.standard_normal(shape).astype(np.float32).tobytes()
        header["bert." + name] = {
            "dtype": "F32",
            "shape": list(shape),
            "data_offsets": [len(blobs), len(blobs) + len(data)],
        }
        blobs += data
    encoded = json.dumps(header).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(encoded)) + encoded + blobs)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (directory / "config.json").write_text(json.dumps({"num_attention_heads": 2}))


def test_a_local_bert_model_directory_is_run_in_process(tmp_path: Path) -> None:
    directory = tmp_path / "tiny-bert"
    directory.mkdir()
    write_tiny_bert(directory)
    model = load_embedder(str(directory))
    assert model is not None and model.model_id.startswith("bert-tiny-bert-")
    assert model.floor == model.gate == DEFAULT_FLOOR
    first = model.embed(["deploys", "cake"])
    assert first.shape == (2, 8)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first, model.embed(["deploys", "cake"]))  # deterministic
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(EmbeddingUnavailable, match="cannot load the BERT model"):
        load_embedder(str(directory))


def load_into(directory: Path, outcome: list[BaseException]) -> None:
    try:
        load_embedder(str(directory))
    except BaseException as exc:  # whatever it is, the test reports it
        outcome.append(exc)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_bert_model_file_that_never_ends_is_refused_not_read(tmp_path: Path, name: str) -> None:
    # a FIFO would be read until a writer came (the model stays loading, a daemon's SIGTERM
    # and `orcactl doctor` wait for it), and /dev/zero until memory ran out
    directory = tmp_path / "tiny-bert"
    directory.mkdir()
    write_tiny_bert(directory)
    endless = directory / name
    for make in ("fifo", "device"):
        endless.unlink()
        if make == "fifo":
            os.mkfifo(endless)
        else:
            endless.symlink_to("/dev/zero")
        outcome: list[BaseException] = []
        loading = threading.Thread(target=load_into, args=(directory, outcome), daemon=True)
        loading.start()
        loading.join(timeout=10)
        if loading.is_alive() and make == "fifo":  # let the stuck reader go: it reads an end
            os.close(os.open(endless, os.O_WRONLY | os.O_NONBLOCK))
        assert not loading.is_alive(), f"loading waited on {make} {name}"
        [error] = outcome
        assert isinstance(error, EmbeddingUnavailable), error
        assert f"{endless} is not a regular file" in str(error), error


def hashed_vector(text: str, dims: int = 32) -> list[float]:
    vector = [0.0] * dims
    for word in text.lower().split():
        vector[sum(map(ord, word)) % dims] += 1.0
    return vector


def answer_embeddings(handler: Any, state: FakeOpenAI) -> None:
    inputs = state.requests[-1].json()["input"]
    data = [{"index": i, "embedding": hashed_vector(t)} for i, t in enumerate(inputs)]
    body = json.dumps({"object": "list", "data": data}).encode()
    handler.send_fixed(200, body, "application/json", {})


def test_endpoint_embeds_through_a_real_http_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBED_KEY", "k-123")
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        loaded = Embeddings.load(
            "endpoint",
            base_url=server.base_url,
            model="nomic",
            api_key_env="EMBED_KEY",
            timeout_s=2.0,
        )
        assert loaded.state == "ready" and loaded.model_id == "endpoint-nomic"
        vectors = loaded.embed(["deploy prod", "bake cake"])
        assert vectors is not None and vectors.shape == (2, 32)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        request = server.requests[0]
        assert request.path.endswith("/embeddings")
        assert request.json() == {"model": "nomic", "input": ["deploy prod", "bake cake"]}
        assert request.headers["authorization"] == "Bearer k-123"


def answer_embeddings_as(code: int, *, same_index: bool = False) -> Any:
    """Vectors for the request's inputs, with status `code`, or all at index 0."""

    def respond(handler: Any, state: FakeOpenAI) -> None:
        inputs = state.requests[-1].json()["input"]
        data = [
            {"index": 0 if same_index else i, "embedding": hashed_vector(t)}
            for i, t in enumerate(inputs)
        ]
        location = {"Location": "http://elsewhere.invalid/v1/embeddings"}
        body = json.dumps({"data": data}).encode()
        handler.send_fixed(code, body, "application/json", location if code != 200 else {})

    return respond


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        pytest.param(answer_embeddings_as(302), "answered 302 Found", id="redirect"),
        pytest.param(answer_embeddings_as(200, same_index=True), "wrong shape", id="same-index"),
    ],
)
def test_an_answer_that_is_not_each_texts_vector_once_gives_none(
    behaviour: Any, reason: str
) -> None:
    """The vectors of a redirect (not followed) are not the endpoint's answer, and rows that
    do not give each text its own index cannot be told apart."""
    with FakeOpenAI() as server:
        server.default = behaviour
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["deploy prod", "bake cake"]) is None
        assert reason in (loaded.reason or "")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b"{not json", "its answer is not JSON", id="not-json"),
        pytest.param(
            b'{"object": "list", "model": "m"}',
            "its answer is not an embeddings list (`data`, each item with `index` and "
            "`embedding`): no 'data'",
            id="no-data",
        ),
        # a server that answers 200 with an error: its own message, not the `data` it lacks
        pytest.param(
            b'{"error": {"message": "model \'m\' not found, try pulling it first"}}',
            "the server reported an error: model 'm' not found, try pulling it first",
            id="error-body",
        ),
        pytest.param(
            b'{"error": "no such model\\n\\u001b[31mm"}',
            "the server reported an error: no such model [31mm",
            id="error-with-control-characters",
        ),
    ],
)
def test_an_answer_that_is_no_embeddings_list_is_said_in_words(body: bytes, reason: str) -> None:
    """`orcactl status` and doctor showed the decoder's own words ("Expecting property name
    enclosed in double quotes: line 1 column 2 (char 1)") or the bare missing key ('data')."""
    with FakeOpenAI() as server:
        server.default = junk(body, "application/json")
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["deploy prod"]) is None
        assert loaded.reason == f"embedding endpoint {server.base_url}/embeddings: {reason}"


def test_an_error_answered_with_200_keeps_neither_the_key_nor_more_than_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-embed-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
    monkeypatch.setenv("EMBED_KEY", key)
    message = f"invalid key {key}; " + "see the documentation " * 100
    with FakeOpenAI() as server:
        server.default = junk(json.dumps({"error": {"message": message}}).encode(), "text/json")
        loaded = Embeddings.load(
            "endpoint", base_url=server.base_url, model="m", api_key_env="EMBED_KEY", timeout_s=2.0
        )
        assert loaded.embed(["deploy prod"]) is None
        reason = loaded.reason or ""
        assert "the server reported an error: invalid key " in reason, reason
        assert key not in reason and "9f8e7d6c5b4a" not in reason, reason
        assert len(reason) < len(server.base_url) + 300, reason


def test_a_loopback_endpoint_is_reached_directly_whatever_proxy_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As for extraction: a proxy the environment names for the outside (nothing listens on
    port 9) is not asked to reach a server on this machine, nor given its texts and key."""
    for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["deploy prod"]) is not None, loaded.reason
        assert len(server.requests) == 1


def test_https_to_a_plain_http_endpoint_gives_the_tls_error_as_the_reason() -> None:
    with FakeOpenAI() as server:
        base_url = server.base_url.replace("http://", "https://")
        loaded = Embeddings.load("endpoint", base_url=base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["deploy prod"]) is None
        assert (loaded.reason or "").startswith(f"embedding endpoint {base_url}/embeddings: [SSL")


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("ftp://deploy:hunter2@127.0.0.1/v1", "'ftp://[credentials]@127.0.0.1/v1' is not an http"),
        ("http://127.0.0.1:99999/v1", "'http://127.0.0.1:99999/v1' is not a valid URL (Port out"),
    ],
)
def test_a_base_url_no_request_can_be_sent_to_leaves_the_endpoint_unavailable(
    base_url: str, problem: str
) -> None:
    """Said once, when the model loads, rather than by every recall's failed request."""
    loaded = Embeddings.load("endpoint", base_url=base_url, model="m", timeout_s=1.0)
    assert loaded.state == "unavailable"
    assert f"[recall.endpoint] base_url {problem}" in (loaded.reason or "")
    assert "hunter2" not in (loaded.reason or "")


def test_credentials_in_the_endpoints_url_are_not_in_its_reason() -> None:
    with FakeOpenAI() as server:
        server.script(status(500))
        base_url = server.base_url.replace("http://", "http://deploy:S3cretPassw0rd9@")
        loaded = Embeddings.load("endpoint", base_url=base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["deploy prod"]) is None
        assert server.requests[0].headers["authorization"].startswith("Basic ")
        assert loaded.reason is not None and "S3cretPassw0rd9" not in loaded.reason
        assert "embedding endpoint http://[credentials]@127.0.0.1:" in loaded.reason


def answer_nan_for_poison(handler: Any, state: FakeOpenAI) -> None:
    """As a server that fails on one input of a batch: NaN for it (json.dumps writes NaN)."""
    inputs = state.requests[-1].json()["input"]
    data = [
        {"index": i, "embedding": [float("nan")] * 32 if "poison" in t else hashed_vector(t)}
        for i, t in enumerate(inputs)
    ]
    handler.send_fixed(200, json.dumps({"data": data}).encode(), "application/json", {})


def test_endpoint_keeps_a_batch_when_one_answer_is_not_a_number_and_sends_at_most_64k() -> None:
    with FakeOpenAI() as server:
        server.default = answer_nan_for_poison
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=2.0)
        vectors = loaded.embed(["deploy prod", "poison pill", "bake cake"])
        assert vectors is not None and np.isfinite(vectors).all()
        assert not vectors[1].any()  # nothing said: a zero row, cosine 0 with everything
        assert np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-5)
        loaded.embed(["x" * 1_000_000])
        assert len(server.requests[-1].json()["input"][0]) == embedders.EMBED_READ_CHARS
        # a key across the cut is redacted before it: no part of it leaves the machine
        key = "AKIAZ3QWERTY7ABCDEFG"  # (AWS's documented example key is left as it is)
        loaded.embed(["y " * (embedders.EMBED_READ_CHARS // 2 - 5) + key + " z" * 10])
        sent = server.requests[-1].json()["input"][0]
        assert len(sent) == embedders.EMBED_READ_CHARS and "AKIA" not in sent


def endpoint_on_a_clock(server: FakeOpenAI, now: list[float], timeout_s: float = 0.3) -> Embeddings:
    """The endpoint model of `server`, its rests timed by `now[0]` (seconds)."""
    loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=timeout_s)
    endpoint = loaded.embedder
    assert isinstance(endpoint, EndpointEmbedder)
    endpoint.breakers = {purpose: EndpointBreaker(lambda: now[0]) for purpose in PURPOSES}
    return loaded


def inputs_asked(server: FakeOpenAI, count: int) -> list[list[str]]:
    """The texts of every request `server` has had, once it has had `count`: a request that the
    client's deadline cut may reach the server's thread after the call has returned (on a busy
    machine, well after it)."""
    return [request.json()["input"] for request in server.wait_for_requests(count, timeout=10.0)]


def test_endpoint_failures_give_no_vector_within_the_deadline_and_rest_the_endpoint() -> None:
    now = [0.0]
    with FakeOpenAI() as server:
        # a deadline of 1 s, a third of the stall: at 0.3 s a loaded machine could cut the
        # request before it reached the server, whose script then answered the next one
        loaded = endpoint_on_a_clock(server, now, timeout_s=1.0)
        server.script(stall_before_headers(3.0), status(500))
        started = time.monotonic()
        assert loaded.embed(["slow"]) is None
        assert time.monotonic() - started < 2.0
        assert "embedding endpoint" in (loaded.reason or "")
        # resting: answered without asking the server (a hung one costs its deadline)
        assert loaded.embed(["again"]) is None
        assert inputs_asked(server, 1) == [["slow"]]
        assert "asked again in 1.0 s" in (loaded.reason or "")
        now[0] = 1.0  # the rest is over: asked again, and a 500 doubles the rest
        assert loaded.embed(["error"]) is None
        assert loaded.reason == (
            f"embedding endpoint {server.base_url}/embeddings answered 500 Internal Server Error"
        )
        now[0] = 2.9
        assert loaded.embed(["still resting"]) is None and len(server.requests) == 2
        assert "failed 2 time(s) in a row; asked again in 0.1 s" in (loaded.reason or "")
        now[0] = 3.0
        server.default = answer_embeddings
        assert loaded.embed(["back"]) is not None and loaded.reason is None  # it works again
        server.script(status(500))  # a failure after an answer rests it one second again
        assert loaded.embed(["error"]) is None
        now[0] = 4.0
        assert loaded.embed(["back"]) is not None and len(server.requests) == 5
    with pytest.raises(EmbeddingUnavailable, match="base_url and model"):
        EndpointEmbedder("", "", None, 1.0)


def test_an_endpoint_rests_as_long_as_its_retry_after_asks_within_the_cap() -> None:
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now)
        server.script(status(429, retry_after="7"), status(503, retry_after="99999"))
        server.default = answer_embeddings
        assert loaded.embed(["busy"]) is None
        now[0] = 6.9
        assert loaded.embed(["busy"]) is None and len(server.requests) == 1
        now[0] = 7.0
        assert loaded.embed(["busy"]) is None and len(server.requests) == 2
        now[0] = 7.0 + EMBEDDING_COOLDOWN_MAX_S - 0.1  # the cap, not the server's day
        assert loaded.embed(["busy"]) is None and len(server.requests) == 2
        now[0] = 7.0 + EMBEDDING_COOLDOWN_MAX_S
        assert loaded.embed(["busy"]) is not None and len(server.requests) == 3


def test_a_refusing_endpoint_is_up_and_is_not_rested() -> None:
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now)
        server.script(status(400, "input too long"))
        server.default = answer_embeddings
        with pytest.raises(EmbeddingRefused):
            loaded.try_embed(["x" * 5000])
        assert loaded.embed(["short"]) is not None and len(server.requests) == 2


@pytest.mark.parametrize(
    "trickle",
    [
        pytest.param(trickled_headers(every_s=0.05), id="headers"),
        pytest.param(
            trickled_body(b'{"data": [{"index": 0, "embedding": [0.25, 0.5, 0.75, 1.0]}]}', 0.1),
            id="body",
        ),
    ],
)
def test_a_server_that_trickles_its_answer_is_cut_at_the_deadline(trickle: Any) -> None:
    """Each piece comes well within any per-read timeout: only a deadline on the whole request
    ends it (the body alone takes 6 s, the headers 50 s)."""
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now, timeout_s=0.3)
        server.script(trickle)
        server.default = answer_embeddings
        started = time.monotonic()
        assert loaded.embed(["slow"]) is None
        assert time.monotonic() - started < 2.0
        assert (
            loaded.reason
            == f"embedding endpoint {server.base_url}/embeddings: timed out after 0.3 s"
        )
        assert loaded.embed(["resting"]) is None
        assert inputs_asked(server, 1) == [["slow"]]
        now[0] = 1.0  # the next request after the rest is answered as usual
        assert loaded.embed(["back"]) is not None and loaded.reason is None


def test_an_endless_compressed_or_absurd_answer_is_refused_without_holding_it() -> None:
    limit = (
        endpoint_embedder.EMBEDDING_ANSWER_BASE_BYTES
        + endpoint_embedder.EMBEDDING_ANSWER_BYTES_PER_TEXT
    )
    bomb = gzip.compress(b" " * 50_000_000)  # 49 KiB that would swell to 48 MiB

    def compressed(handler: Any, state: FakeOpenAI) -> None:
        handler.send_fixed(200, bomb, "application/json", {"Content-Encoding": "gzip"})

    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now, timeout_s=10.0)
        server.script(endless_body(), compressed, junk(b"[" * 100_000, "application/json"))
        server.default = answer_embeddings
        started = time.monotonic()
        assert loaded.embed(["one text"]) is None
        assert time.monotonic() - started < 5.0  # cut at the limit, not at the deadline
        assert loaded.reason == (
            f"embedding endpoint {server.base_url}/embeddings: "
            f"its answer is larger than {limit} bytes"
        )
        now[0] = 1.0  # asked for none, the answer came compressed: not decoded
        assert loaded.embed(["one text"]) is None
        assert server.requests[-1].headers["accept-encoding"] == "identity"
        assert loaded.reason == (
            f"embedding endpoint {server.base_url}/embeddings: "
            "its answer is compressed (gzip), unasked"
        )
        now[0] = 3.0  # nested past what a JSON parser recurses into: a failure, no crash
        assert loaded.embed(["one text"]) is None
        assert "embedding endpoint" in (loaded.reason or "")
        now[0] = 7.0
        assert loaded.embed(["one text"]) is not None and len(server.requests) == 4


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_an_answer_is_read_up_to_its_limit_and_not_a_byte_more(over: int) -> None:
    """Two texts may take 64 KiB plus 256 KiB each: an answer of exactly that many bytes (a
    real one, padded with the whitespace JSON allows) is read; one byte more is refused."""
    limit = (
        endpoint_embedder.EMBEDDING_ANSWER_BASE_BYTES
        + 2 * endpoint_embedder.EMBEDDING_ANSWER_BYTES_PER_TEXT
    )
    data = [{"index": i, "embedding": hashed_vector(t)} for i, t in enumerate(["a", "b"])]
    body = json.dumps({"data": data}).encode()
    body += b" " * (limit + over - len(body))

    def padded(handler: Any, state: FakeOpenAI) -> None:
        handler.send_fixed(200, body, "application/json", {})

    with FakeOpenAI() as server:
        server.default = padded
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=5.0)
        vectors = loaded.embed(["a", "b"])
        if over:
            assert vectors is None
            assert (loaded.reason or "").endswith(f"its answer is larger than {limit} bytes")
        else:
            assert vectors is not None and vectors.shape == (2, 32)


def test_a_request_cut_by_the_clients_close_is_a_failure_and_the_client_starts_again() -> None:
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now, timeout_s=10.0)
        server.script(stall_before_headers(5.0))
        server.default = answer_embeddings
        endpoint = loaded.embedder
        assert isinstance(endpoint, EndpointEmbedder)
        results: list[Any] = []
        waiting = threading.Thread(target=lambda: results.append(loaded.embed(["slow"])))
        waiting.start()
        server.wait_for_requests(1)
        endpoint._http().close()  # as when the model goes while a request waits
        waiting.join(timeout=5.0)
        assert results == [None]  # a failure like any other, not an exception
        assert (loaded.reason or "").startswith(f"embedding endpoint {server.base_url}/")
        now[0] = 1.0  # the failure rested it (its trial had an outcome); then it answers again
        assert loaded.embed(["back"]) is not None


def test_the_endpoint_client_ends_with_its_model() -> None:
    """Its event loop runs on a thread of its own, which goes when the model does."""
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        before = set(threading.enumerate())
        loaded = Embeddings.load("endpoint", base_url=server.base_url, model="m", timeout_s=2.0)
        assert loaded.embed(["x"]) is not None
        started = [
            t for t in set(threading.enumerate()) - before if t.name == "orcad-embedding-http"
        ]
        assert len(started) == 1 and started[0].is_alive()
        del loaded
        gc.collect()
        started[0].join(timeout=5.0)
        assert not started[0].is_alive()


def test_after_a_rest_one_caller_asks_the_endpoint_while_the_others_skip_it() -> None:
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now, timeout_s=30.0)
        server.script(status(500), stall_before_headers(30.0))
        assert loaded.embed(["error"]) is None
        now[0] = 1.0
        asking = threading.Thread(target=loaded.embed, args=(["slow"],))
        asking.start()
        server.wait_for_requests(2)
        assert loaded.embed(["meanwhile"]) is None  # not a second call waiting on a hung server
        assert "being asked again now" in (loaded.reason or "")
        assert len(server.requests) == 2
        server.closing.set()  # the hung call ends (without an answer)
        asking.join()
    assert len(server.requests) == 2


def test_calls_made_before_a_rest_neither_lengthen_it_nor_end_a_trial() -> None:
    """Calls waiting together on a hung endpoint fail together: one failure, one rest."""
    now = [0.0]
    breaker = EndpointBreaker(lambda: now[0])
    first, second = breaker.admit(), breaker.admit()
    assert first.resting is None and second.resting is None
    breaker.failed(first.round, "timed out")
    breaker.failed(second.round, "timed out")  # (made before the rest began)
    assert breaker.admit().resting == "timed out (failed 1 time(s) in a row; asked again in 1.0 s)"
    now[0] = 1.0
    trial = breaker.admit()
    assert trial.resting is None
    breaker.failed(second.round, "timed out")  # a straggler of the first round ends no trial
    assert breaker.admit().resting == "timed out (being asked again now)"
    breaker.failed(trial.round, "timed out again")
    now[0] = 2.9
    assert breaker.admit().resting == (
        "timed out again (failed 2 time(s) in a row; asked again in 0.1 s)"
    )
    now[0] = 3.0
    assert breaker.admit().resting is None


def test_the_backfill_waits_for_a_slow_server_longer_than_recall_or_a_publish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recall's deadline (here 0.3 s) is set for one prompt, and a publish's is recall's (the
    barrier waits for it); the backfill's batches get at least EMBEDDING_BACKGROUND_TIMEOUT_S."""
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, [0.0])
        server.default = stall_before_headers(1.0, then=answer_embeddings)
        assert loaded.embed(["a prompt"]) is None
        assert loaded.embed(["eight facts of a job"], purpose="publish") is None
        assert "timed out after 0.3 s" in (loaded.reason or "")
        assert loaded.embed(["a batch"], purpose="backfill") is not None
        monkeypatch.setattr(endpoint_embedder, "EMBEDDING_BACKGROUND_TIMEOUT_S", 0.5)
        with pytest.raises(EmbeddingTimedOut, match=r"timed out after 0\.5 s"):
            loaded.try_embed(["a batch"], purpose="backfill")


def test_each_purpose_rests_on_its_own_failures_and_a_shorter_deadlines_answer_ends_all() -> None:
    """A batch or a job's facts too many for a slow server say nothing about a prompt, nor a
    failure within recall's deadline about the backfill's longer one; an answer within recall's
    (or a publish's, the same) ends every rest, one within the backfill's only its own."""
    now = [0.0]
    with FakeOpenAI() as server:
        loaded = endpoint_on_a_clock(server, now)
        server.script(status(503))
        server.default = answer_embeddings
        assert loaded.embed(["a batch of the backfill"], purpose="backfill") is None
        assert loaded.embed(["the backfill again"], purpose="backfill") is None  # it rests
        assert len(server.requests) == 1
        assert loaded.embed(["eight facts of a job"], purpose="publish") is not None
        assert loaded.embed(["the backfill again"], purpose="backfill") is not None
        server.script(status(503))
        assert loaded.embed(["eight facts of a job"], purpose="publish") is None
        assert loaded.embed(["a prompt"]) is not None and len(server.requests) == 5
        assert loaded.embed(["eight facts of a job"], purpose="publish") is not None
        server.script(status(503))
        assert loaded.embed(["a prompt"]) is None  # recall rests now
        assert loaded.embed(["a batch"], purpose="backfill") is not None
        assert loaded.embed(["a prompt"]) is None and len(server.requests) == 8  # still
        now[0] = 1.0
        assert loaded.embed(["a prompt"]) is not None and len(server.requests) == 9


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("floor: abc", "floor"),
        ("gate: nan", "gate"),
        ("gate: inf", "gate"),
        ("gate: -inf", "gate"),
        ("lexical_weight: -0.5", "lexical_weight"),
        ("unrelated_weight: -1", "unrelated_weight"),
        ("project_weight: x", "project_weight"),
        ("lexical_gate: nan", "lexical_gate"),
        ("floor:", "floor"),
    ],
)
def test_a_model_file_with_a_bad_ranking_number_is_not_loaded(
    tmp_path: Path, line: str, named: str
) -> None:
    directory = tiny_static_model(tmp_path / "static", f"id: tiny\n{line}\n")
    with pytest.raises(EmbeddingUnavailable, match=f"MODEL.txt: {named} must be a number"):
        load_embedder(str(directory))


BLAS_THREADS_SCRIPT = """
import json, sys
import numpy
from threadpoolctl import threadpool_info
from orcad.recall.embedding import Embeddings

def counts():
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

before = counts()
Embeddings.load(sys.argv[1])
print(json.dumps([before, counts()]))
"""


@pytest.mark.parametrize(
    ("setting", "environment", "limited"),
    [
        ("builtin", {}, True),  # one thread once a model is loaded
        ("builtin", {"OPENBLAS_NUM_THREADS": "2"}, False),  # a count the user set stays
        ("builtin", {"OMP_NUM_THREADS": "2"}, False),
        ("none", {}, False),  # no model, no numpy work: nothing to change
    ],
)
def test_a_loaded_model_runs_blas_on_one_thread_unless_the_user_chose(
    setting: str, environment: dict[str, str], limited: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in embedding.BLAS_ENVIRONMENT}
    done = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS_SCRIPT, setting],
        env={**env, **environment, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after = json.loads(done.stdout)
    assert before, "numpy's BLAS was not found"
    if "OPENBLAS_NUM_THREADS" in environment:
        assert before == [2] * len(before)  # (so the assertion below can fail)
    assert after == ([1] * len(before) if limited else before)


ONNX_FIXTURES = REPO_ROOT / "tests" / "onnx"  # written by tests/onnx/make_fixtures.py


def onnx_model_dir(
    tmp_path: Path, graph: str, described: str | None = None, name: str | None = None
) -> Path:
    directory = tmp_path / (name or graph.removesuffix(".onnx"))
    directory.mkdir()
    shutil.copy(ONNX_FIXTURES / graph, directory / "model.onnx")
    shutil.copy(ONNX_FIXTURES / "vocab.txt", directory / "vocab.txt")
    if described is not None:
        (directory / "MODEL.txt").write_text(described)
    return directory


def test_a_local_onnx_export_is_run_with_the_inputs_it_declares_and_mean_pooled(
    tmp_path: Path,
) -> None:
    directory = onnx_model_dir(tmp_path, "exported.onnx")
    model = load_embedder(str(directory))
    assert model is not None and model.dims == 4
    # ids [CLS]=2 deploy=4 [SEP]=3: rows (0,0,1,0), (2,0,0,0), (0,0,0,1), averaged
    expected = normalize_rows(np.array([[2 / 3, 0, 1 / 3, 1 / 3]], np.float32))
    assert np.allclose(model.embed(["deploy"]), expected, atol=1e-6)
    assert not model.embed([""]).any()  # no tokens: a zero row, as for every model
    # a model of the user's without MODEL.txt: its id is its file's digest, default settings
    digest = hashlib.sha256((directory / "model.onnx").read_bytes()).hexdigest()[:16]
    assert model.model_id == f"onnx-exported-{digest}"
    assert (model.floor, model.gate) == (DEFAULT_FLOOR, DEFAULT_GATE)
    (directory / "MODEL.txt").write_text("id: mine\nfloor: 0.3\n")
    described = load_embedder(str(directory))
    assert described is not None and (described.model_id, described.floor) == ("mine", 0.3)


def test_an_onnx_model_reads_a_text_for_its_first_126_tokens(tmp_path: Path) -> None:
    model = load_embedder(str(onnx_model_dir(tmp_path, "exported.onnx")))
    assert model is not None
    assert embedders.TRANSFORMER_MAX_TOKENS - 2 == 126  # with [CLS] and [SEP]: 128
    last_read, first_unread = "deploy " * 125 + "staging", "deploy " * 126 + "staging"
    vectors = model.embed([last_read, "deploy " * 125, first_unread, "deploy " * 126])
    assert not np.allclose(vectors[0], vectors[1])  # the 126th token counts
    assert np.allclose(vectors[2], vectors[3])  # the 127th does not


def test_a_text_an_onnx_model_answers_with_nan_for_is_a_text_without_meaning(
    tmp_path: Path,
) -> None:
    model = load_embedder(str(onnx_model_dir(tmp_path, "prod_is_nan.onnx")))
    assert model is not None
    vectors = model.embed(["deploy prod", "deploy"])
    assert not vectors[0].any()  # a zero row: cosine 0 with everything, never NaN
    assert np.allclose(np.linalg.norm(vectors[1]), 1.0)


def test_an_onnx_model_that_cannot_serve_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = onnx_model_dir(tmp_path, "pixels.onnx")
    with pytest.raises(EmbeddingUnavailable, match=r"inputs \['pixels'\] are not a sentence"):
        load_embedder(str(foreign))
    damaged = onnx_model_dir(tmp_path, "exported.onnx")
    (damaged / "model.onnx").write_bytes(b"\x08\x07 not a graph")
    with pytest.raises(EmbeddingUnavailable, match="onnxruntime cannot load"):
        load_embedder(str(damaged))
    loaded = Embeddings.load(str(damaged))
    assert loaded.state == "unavailable" and "onnxruntime cannot load" in (loaded.reason or "")
    negative = onnx_model_dir(tmp_path, "exported.onnx", "id: x\nfloor: -1\n", "negative")
    with pytest.raises(EmbeddingUnavailable, match="floor must be a number of at least 0"):
        load_embedder(str(negative))
    for graph, reason in [
        ("all_nan.onnx", r"answered \[\(4,\), \(4,\)\], not finite,"),
        ("per_length.onnx", r"answered \[\(2,\), \(4,\)\] for texts of 2 and 4 tokens"),
    ]:
        with pytest.raises(EmbeddingUnavailable, match=reason):
            load_embedder(str(onnx_model_dir(tmp_path, graph)))
    # a model file that never ends (a FIFO, a device) is refused, not read until it does
    endless = onnx_model_dir(tmp_path, "exported.onnx", name="endless")
    (endless / "model.onnx").unlink()
    (endless / "model.onnx").symlink_to("/dev/zero")
    with pytest.raises(EmbeddingUnavailable, match="is not a regular file"):
        load_embedder(str(endless))
    (endless / "model.onnx").unlink()
    os.mkfifo(endless / "model.onnx")
    with pytest.raises(EmbeddingUnavailable, match="is not a regular file"):
        load_embedder(str(endless))
    (endless / "model.onnx").unlink()
    shutil.copy(ONNX_FIXTURES / "exported.onnx", endless / "model.onnx")
    os.mkfifo(endless / "MODEL.txt")
    with pytest.raises(EmbeddingUnavailable, match="is not a regular file"):
        load_embedder(str(endless))
    # without onnxruntime (a broken install) the built-in model says what to do
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbeddingUnavailable, match=r'onnxruntime cannot be imported.*"static"'):
        load_embedder("builtin")
    assert Embeddings.load("static").state == "ready"  # the static model needs only numpy


def test_the_builtin_model_loads_its_reference_vectors_and_embeds_them_when_damaged(
    builtin: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    prompt = "explain the CAP theorem"
    embedded = GateReferences(builtin.embed(texts[0]), builtin.embed(texts[1]), texts)
    embedded_texts: list[str] = []
    embed = OnnxEmbedder.embed

    def counting(self: Any, texts: Any) -> Any:
        embedded_texts.extend(texts)
        return embed(self, texts)

    shapes = (len(texts[0]), builtin.dims), (len(texts[1]), builtin.dims)
    fitted = read_fitted_gate(BUILTIN_DIR / GATE_FILE, shapes)
    assert fitted is not None and fitted.references is not None
    unrelated, project = fitted.references

    def gate_with(references: GateReferences) -> float:
        vector = builtin.embed([prompt])
        chance = references.probability(vector, [prompt])[0]
        lowered = builtin.project_weight * max(0.0, references.nearest(vector)[0, 1])
        return float(builtin.gate + builtin.unrelated_weight * chance - lowered)

    monkeypatch.setattr(OnnxEmbedder, "embed", counting)
    shipped = Embeddings.load("builtin")
    assert embedded_texts == []  # the 3,647 reference prompts come stored
    query = shipped.query(prompt)
    assert query is not None
    # the stored vectors as they are (float16), multiplied as int8 rows
    # (orcad.deliberate.row_products); this CPU's own may differ (INT8_KERNELS_DIFFER)
    as_stored = GateReferences(
        unrelated.astype(np.float32), project.astype(np.float32), texts, fitted
    )
    assert query.gates.gate == pytest.approx(gate_with(as_stored), abs=2e-3)
    gate = gate_with(embedded)
    embedded_texts.clear()
    directory = tmp_path / "minilm"
    shutil.copytree(BUILTIN_DIR, directory)
    arrays = {
        "weights": fitted.weights,
        "bias": fitted.bias,
        "words": np.array(fitted.words),
        "digest": np.str_(fitted.digest),
    }
    for name, damaged in {
        "nan": {"unrelated": np.full_like(unrelated, np.nan), "project": project},
        "narrow": {"unrelated": unrelated[:, :16], "project": project[:, :16]},
        "short": {"unrelated": unrelated[:-1], "project": project},
        "integers": {"unrelated": unrelated.astype(np.int8), "project": project},
        # a small file that would inflate to 800 MB: its header is read, not its data
        "huge": {"unrelated": np.zeros((len(texts[0]), 60_000), np.float16), "project": project},
    }.items():
        np.savez_compressed(directory / GATE_FILE, **arrays, **damaged)
        stored = read_fitted_gate(directory / GATE_FILE, shapes)
        assert stored is not None and stored.references is None, name
        embedded_texts.clear()
        again = Embeddings.load(str(directory)).query(prompt)
        assert again is not None, name
        assert again.gates.gate == pytest.approx(gate, abs=2e-3), name  # as int8 rows
        assert len(embedded_texts) > 3000, name  # embedded again


HEAP_SCRIPT = """
import json, threading
from orcad.recall.embedding import Embeddings

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

embeddings = Embeddings.load("builtin")

def recall(prompt):  # as the daemon does: in a worker thread
    thread = threading.Thread(target=embeddings.query, args=(prompt,))
    thread.start()
    thread.join()

recall("which phones must we support")
before = rss_mib()
for number in range(10):
    recall(" ".join(f"word{number}x{n}" for n in range(300)))  # 128 tokens, the most read
print(json.dumps(rss_mib() - before))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap, /proc")
def test_long_prompts_leave_no_memory_behind_once_the_model_loads() -> None:
    """glibc would otherwise keep the buffers of a long prompt's run in the recall thread's
    heap for good (13 MiB after one 128-token prompt, measured without the fixed threshold)."""
    done = subprocess.run(
        [sys.executable, "-c", HEAP_SCRIPT],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout) < 4.0


def test_loading_the_builtin_model_writes_nothing_in_the_users_home(tmp_path: Path) -> None:
    """onnxruntime's Linux builds would write a device id and a queue of telemetry events
    under ~/.cache/Microsoft/DeveloperTools/.onnxruntime when imported."""
    home = tmp_path / "home"
    home.mkdir()
    script = (
        "from orcad.recall.embedding import Embeddings\n"
        "embeddings = Embeddings.load('builtin')\n"
        "assert embeddings.state == 'ready', embeddings.reason\n"
        "assert embeddings.query('which phones must we support') is not None\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")
    }
    subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "HOME": str(home), "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
        check=True,
    )
    assert list(home.rglob("*")) == []


def test_telemetry_is_turned_off_when_a_model_is_configured_not_in_the_loading_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(local_models.ONNXRUNTIME_TELEMETRY, raising=False)
    Embeddings.deferred("none")
    assert local_models.ONNXRUNTIME_TELEMETRY not in os.environ
    deferred = Embeddings.deferred("builtin")
    assert os.environ[local_models.ONNXRUNTIME_TELEMETRY] == "1"
    assert deferred.state == "loading"  # set before any load
