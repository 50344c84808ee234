"""Query derivation, the MATCH builder and the planner, run against a real FTS5 table."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orcad import query
from orcad.limits import QUERY_MAX_CONSIDERED, QUERY_MAX_TERMS
from orcad.query import (
    FTS5_TOKENIZE,
    POSTINGS_BUDGET,
    STEM_CACHED_LENGTH,
    _cached_stem,
    derive_query_terms,
    distinct_terms,
    match_expression,
    most_selective,
    plan_terms,
    quote_term,
    stem,
)

pytestmark = pytest.mark.inprocess

RECORDS = [
    "release checks use cargo test --workspace",
    "I prefer concise status updates",
    "the daemon deploys with json-rpc over config.toml",
    "AND OR NOT NEAR are FTS5 operators",
    'he said "quoted" things (in parens) and *stars* ^carets',
    "café résumé naïve",
    "emoji 🎉 party",
]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute(f"CREATE VIRTUAL TABLE doc USING fts5(body, tokenize = '{FTS5_TOKENIZE}')")
    connection.executemany("INSERT INTO doc (body) VALUES (?)", [(r,) for r in RECORDS])
    return connection


def search(connection: sqlite3.Connection, text: str) -> list[str]:
    expression = match_expression(derive_query_terms(text))
    if not expression:
        return []
    rows = connection.execute(
        "SELECT body FROM doc WHERE doc MATCH ? ORDER BY rank", (expression,)
    ).fetchall()
    return [row[0] for row in rows]


HOSTILE_PIECES = st.sampled_from(
    [
        '"',
        "'",
        '""',
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "near/3",
        "json-rpc",
        "config.toml",
        "*",
        "^",
        "(",
        ")",
        "()",
        ":",
        "body:",
        "col:x",
        "-",
        "+",
        "{",
        "}",
        "🎉",
        "👩‍💻",
        "\x00",
        "\u0301",
        "\ue000",
        "_",
        "__init__",
        " ",
        "\n",
        "\t",
        "é",
        "ǅ",
        "İ",
        "ß",
        "…",
        "½",
        "٣",
    ]
)
HOSTILE_TEXT = st.one_of(
    st.text(),
    st.text(st.characters(categories=["Cs", "Cc", "So", "Co", "Mn", "Pd", "Po", "Ll"])),
    st.lists(st.one_of(HOSTILE_PIECES, st.text(max_size=6)), max_size=30).map("".join),
    st.lists(st.one_of(HOSTILE_PIECES, st.text(max_size=6)), max_size=30).map(" ".join),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE_TEXT)
def test_hostile_text_never_breaks_fts5(fts: sqlite3.Connection, text: str) -> None:
    terms = derive_query_terms(text)
    assert len(terms) <= QUERY_MAX_TERMS
    assert len(set(terms)) == len(terms)
    assert all(term == term.lower() for term in terms)
    search(fts, text)  # raises sqlite3.OperationalError on any syntax error


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(terms=st.lists(st.one_of(st.text(min_size=1), HOSTILE_TEXT), max_size=12))
def test_match_expression_of_any_strings_parses(fts: sqlite3.Connection, terms: list[str]) -> None:
    expression = match_expression(terms)
    if expression:
        fts.execute("SELECT count(*) FROM doc WHERE doc MATCH ?", (expression,)).fetchone()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("json-rpc", RECORDS[2]),
        ("config.toml", RECORDS[2]),
        ("AND", RECORDS[3]),
        ("NEAR(", RECORDS[3]),
        ('"quoted"', RECORDS[4]),
        ("(in parens)", RECORDS[4]),
        ("*stars*", RECORDS[4]),
        ("^carets", RECORDS[4]),
        ("cafe", RECORDS[5]),
        ("CAFÉ", RECORDS[5]),
        ("deploying", RECORDS[2]),  # porter stemming: deploying finds deploys
        ("emoji 🎉", RECORDS[6]),
    ],
)
def test_hostile_text_finds_the_literal_record(
    fts: sqlite3.Connection, text: str, expected: str
) -> None:
    assert search(fts, text)[0] == expected


def test_empty_and_separator_only_text_give_no_terms() -> None:
    assert derive_query_terms("") == []
    assert derive_query_terms('  🎉 -- ** () "" ') == []
    assert match_expression([]) == ""


def test_twelve_distinct_terms_at_most_in_order_of_first_appearance() -> None:
    words = [f"word{i:02d}" for i in range(20)]  # equally selective: the first ones stay
    assert derive_query_terms(" ".join(words)) == words[:QUERY_MAX_TERMS]
    assert derive_query_terms(" ".join(words[:12])) == words[:12]
    assert derive_query_terms(" ".join(words[:13])) == words[:12]
    repeated = " ".join(["alpha", "beta", "Alpha", "ALPHA", "beta"] * 10)
    assert derive_query_terms(repeated) == ["alpha", "beta"]


def test_stop_words_are_dropped_only_when_better_terms_exist() -> None:
    assert derive_query_terms("what is the release check for this") == ["release", "check"]
    assert derive_query_terms("what is the") == ["what", "is", "the"]
    assert derive_query_terms("a b cargo") == ["cargo"]
    # Stop words do not use up the 12-term budget while better terms exist.
    text = "the " * 5 + " ".join(f"term{i}" for i in range(12)) + " of and"
    assert derive_query_terms(text) == [f"term{i}" for i in range(12)]


def test_quote_term_doubles_embedded_quotes() -> None:
    assert quote_term('a"b') == '"a""b"'
    assert match_expression(["x", 'y"']) == '"x" OR "y"""'


def test_plan_keeps_selective_terms_and_drops_common_ones() -> None:
    total = 100_000
    terms = ["common", "rare", "medium", "absent"]
    freq = {"common": 60_000, "rare": 3, "medium": 40}
    assert plan_terms(terms, freq, total) == ["rare", "medium"]


def test_plan_always_keeps_the_rarest_matching_term_even_when_common() -> None:
    assert plan_terms(["a1", "b1"], {"a1": 90_000, "b1": 80_000}, 100_000) == ["b1"]


def test_plan_respects_the_postings_budget() -> None:
    terms = [f"t{i}" for i in range(6)]
    freq = {term: 600 for term in terms}
    kept = plan_terms(terms, freq, 1_000_000)
    # The rarest is free; then as many 600-posting terms as fit the budget.
    assert len(kept) == 1 + POSTINGS_BUDGET // 600
    assert kept == terms[: len(kept)]


def test_plan_budget_boundary() -> None:
    total = 100_000
    assert plan_terms(["x", "y"], {"x": 1, "y": POSTINGS_BUDGET}, total) == ["x", "y"]
    assert plan_terms(["x", "y"], {"x": 1, "y": POSTINGS_BUDGET + 1}, total) == ["x"]


def test_plan_small_index_keeps_everything_that_matches() -> None:
    terms = ["alpha", "beta", "gamma", "delta"]
    freq = {"alpha": 3, "beta": 2, "gamma": 3}
    assert plan_terms(terms, freq, 3) == ["alpha", "beta", "gamma"]
    big = {"alpha": POSTINGS_BUDGET, "beta": POSTINGS_BUDGET + 1, "gamma": POSTINGS_BUDGET + 1}
    assert plan_terms(terms, big, POSTINGS_BUDGET) == ["alpha", "beta", "gamma"]
    assert plan_terms(terms, big, POSTINGS_BUDGET + 1) == ["alpha"]


def test_plan_with_no_matching_term_returns_the_terms_unchanged() -> None:
    assert plan_terms(["x", "y"], {}, 100) == ["x", "y"]
    assert plan_terms([], {}, 0) == []


@given(
    terms=st.lists(st.text(min_size=1, max_size=5), max_size=12, unique=True),
    freqs=st.lists(st.integers(min_value=0, max_value=200_000), min_size=12, max_size=12),
    total=st.integers(min_value=0, max_value=200_000),
)
def test_plan_is_a_nonempty_ordered_subset(terms: list[str], freqs: list[int], total: int) -> None:
    freq = dict(zip(terms, freqs, strict=False))
    kept = plan_terms(terms, freq, total)
    assert set(kept) <= set(terms)
    assert kept == [term for term in terms if term in kept]
    if terms:
        assert kept
    if any(freq.get(term, 0) for term in terms):
        rarest = min((freq[t], i) for i, t in enumerate(terms) if freq.get(t, 0) > 0)
        assert terms[rarest[1]] in kept


def test_query_module_is_pure() -> None:
    code = (
        "import sys, orcad.query; "
        "bad = {'trio', 'sqlite3', '_sqlite3'} & set(sys.modules); "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_long_prompt_keeps_its_most_selective_terms_not_its_first() -> None:
    log = (
        "Traceback most recent call last file app main py line 12 in module run "
        "psycopg2 OperationalError FATAL too many connections for role"
    )
    terms = derive_query_terms(log)
    assert len(terms) == QUERY_MAX_TERMS
    assert {"psycopg2", "operationalerror", "connections", "traceback"} <= set(terms)
    assert terms == [t for t in distinct_terms(log) if t in terms]  # order of appearance kept


def test_with_counts_rare_matching_terms_win_over_unknown_and_common_ones() -> None:
    terms = [f"t{i:02d}" for i in range(20)]
    counts = {"t19": 1, "t18": 2, "t00": 500}  # t19 and t18 match few records; t00 very many
    chosen = most_selective(terms, counts, 3)
    assert chosen == ["t00", "t18", "t19"]
    chosen = most_selective(terms, {**counts, "t05": 3}, 3)
    assert chosen == ["t05", "t18", "t19"]
    assert most_selective(terms[:3], counts, 3) == terms[:3]  # fitting: all, unchanged


def test_at_most_64_distinct_terms_are_considered() -> None:
    words = [f"term{i:03d}" for i in range(QUERY_MAX_CONSIDERED + 1)]
    assert distinct_terms(" ".join(words)) == words[:QUERY_MAX_CONSIDERED]
    assert distinct_terms(" ".join(words[:QUERY_MAX_CONSIDERED])) == words[:QUERY_MAX_CONSIDERED]


def test_stems_are_cached_for_words_of_ordinary_length_only() -> None:
    # recall stems the same words prompt after prompt; a pasted blob of long made-up words must
    # not fill the cache, and must stem just as an ordinary word does
    assert stem("deployments") == stem("deploying") == "deploy"
    long_word = "x" * STEM_CACHED_LENGTH + "deployments"
    before = _cached_stem.cache_info().currsize
    for n in range(200):
        word = f"{long_word}{'a' * n}ing"
        assert stem(word) == word[: -len("ing")]
    assert stem(long_word) == long_word[: -len("s")].removesuffix("ment")
    assert _cached_stem.cache_info().currsize == before
    at_limit = "z" * (STEM_CACHED_LENGTH - len("deploying")) + "deploying"  # 40: cached
    assert stem(at_limit) == at_limit[: -len("ing")]
    assert _cached_stem.cache_info().currsize == before + 1
    assert stem("z" + at_limit) == "z" + at_limit[: -len("ing")]  # 41 characters: not
    assert _cached_stem.cache_info().currsize == before + 1


def test_terms_are_read_from_the_first_query_read_chars_characters_only() -> None:
    filler = "é " * ((query.QUERY_READ_CHARS - len("inside")) // 2)
    text = filler + "inside"
    assert len(text) == query.QUERY_READ_CHARS
    assert distinct_terms(text) == ["inside"]  # its last character is read
    # one character more is not: the word is cut at the bound and the next one never read
    assert distinct_terms(text + "x beyond") == ["inside"]
    assert distinct_terms(filler[8:] + "beyond inside") == ["beyond", "inside"]  # both fit


def _distinct_terms_at_once(text: str, max_terms: int) -> list[str]:
    """distinct_terms as it was: the whole text folded and tokenized in one go."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    folded = "".join(ch for ch in decomposed if ch not in query._DIACRITICS)
    distinct = list(dict.fromkeys(re.findall(query._TOKEN, folded)))
    strong = [term for term in distinct if not query.is_weak_term(term)]
    return (strong if strong else distinct)[:max_terms]


PIECES = st.sampled_from(
    [
        " ",
        "\n",
        "\t",
        "  ",
        "the",
        "of",
        "a",
        "deploy",
        "Σ",
        "ΣΑΣ",
        "é",
        "e\u0301",
        "\u0301",
        "日本",
        "x_y",
        "k8s",
        "\u00a0",
        "ﬁle",
        "İstanbul",
        "ǅ",
        "\ue000",
    ]
)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    pieces=st.lists(st.one_of(PIECES, HOSTILE_TEXT), max_size=80),
    chunk=st.integers(min_value=1, max_value=12),
    max_terms=st.integers(min_value=1, max_value=8),
)
def test_terms_read_piece_by_piece_are_those_of_the_whole_text(
    pieces: list[str], chunk: int, max_terms: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pieces)
    with monkeypatch.context() as patch:
        patch.setattr(query, "FOLD_CHUNK_CHARS", chunk)
        assert distinct_terms(text, max_terms) == _distinct_terms_at_once(text, max_terms)


def test_a_pasted_log_is_read_only_as_far_as_its_terms_go(monkeypatch: pytest.MonkeyPatch) -> None:
    folded: list[int] = []
    fold = query._fold
    monkeypatch.setattr(query, "_fold", lambda text: folded.append(len(text)) or fold(text))
    lines = [f"layer sha256:{n:064x} pulled from the registry" for n in range(100_000)]
    terms = distinct_terms("\n".join(lines))
    assert len(terms) == QUERY_MAX_CONSIDERED and terms[0] == "layer"
    assert sum(folded) <= 2 * query.FOLD_CHUNK_CHARS  # of some 7 MB


def test_a_written_out_control_character_separates_words_as_the_character_does() -> None:
    # how a stored fact holds a NUL, an escape, a right-to-left mark and a tag character; the
    # escape stays a word too, for the same text written by hand (a fact about \\u200f)
    for escape in ("\\x00", "\\x1b", "\\x9f", "\\u200f", "\\U000e0041"):
        assert query.tokenize(f"run{escape}bazelisk") == ["run", escape[1:].lower(), "bazelisk"], (
            escape
        )
    assert query.distinct_terms("what does \\u200f do") == ["u200f"]  # a prompt asking for it
    # an escape of a character that is never written out is text as it is
    for kept in ("\\x41", "\\u00e9", "\\U0001f600", "\\Uffffffff"):
        assert query.tokenize(f"run{kept}bazelisk") == query.tokenize(f"run {kept[1:]}bazelisk")


@pytest.mark.parametrize(
    "text",
    ["हिन्दी भाषा", "הַפְּרוֹיֶקְט בְּעִבְרִית", "مَرْحَبًا", "Tiếng Việt", "naïve café", "ǖ ḁ ȩ"],
    ids=["devanagari", "hebrew", "arabic", "vietnamese", "latin", "latin-marks-below"],
)
def test_terms_are_the_words_the_index_reads(text: str) -> None:
    """What a query reads in a text is what FTS5's tokenizer indexes of it (unstemmed)."""
    connection = sqlite3.connect(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'unicode61 remove_diacritics 2')"
    )
    connection.execute("CREATE VIRTUAL TABLE words USING fts5vocab(t, 'instance')")
    connection.execute("INSERT INTO t (x) VALUES (?)", (text,))
    indexed = [term for (term,) in connection.execute("SELECT term FROM words ORDER BY offset")]
    connection.close()
    assert query.tokenize(text) == indexed
