"""`name = value` assignments of credentials, and type annotations that are not values.

Pure module: no I/O. A value assigned to a password, passphrase, secret, credential or wallet
mnemonic name is a credential whatever its entropy; one assigned to a token or key name when it
looks generated (`_assignment_finder`). Also an AWS secret access key after its name, a
generated `key=` or `auth=` in a URL's query, and the filter that drops a name annotated with
a type (`password: SecretStr | None = None`), which is code, not a credential.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import Finder, Span, every_match
from orcad.secret_values import (
    QUOTED_VALUES,
    is_credential_literal,
    is_dotted_name,
    is_phrase_value,
    is_placeholder,
    is_reference,
    looks_random,
)

# ------------------------------------------------- key = value style assignments
# Identifiers whose last part names a credential; plurals and longer words never end here.
_ASSIGNMENT_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("pass", "pass(?:word|wd|phrase|code)?"),  # one scan for the five
    ("pwd", "pwd"),
    ("pw", "pw(?<![a-z0-9]pw)"),  # DB_PW, pw: (a whole name part: not npw)
    ("mnemonic", "mnemonic"),  # a wallet's recovery phrase
    ("secret", "secret"),
    ("token", "token"),
    # a personal access token's usual short name (GITHUB_PAT, AZURE_DEVOPS_EXT_PAT), a whole
    # name part: never path, compat or pattern (starting with its literal keeps the search fast
    # in code, which says "pat" everywhere; the part's start is checked after)
    ("pat", "pat"),
    ("key", "key"),
    ("credential", "credentials?"),
)
# Names that only ever hold a credential: any literal value is one, whatever its entropy.
_PLAIN_KEYWORDS = frozenset({"pass", "pwd", "pw", "mnemonic", "secret"})
# A recovery phrase is words separated by spaces: unquoted, it runs over the words of its line
# up to a comment, at most as many as a phrase has (one name is not read to the line's end
# again for every name on a long line).
_PHRASE_KEYWORDS = frozenset({"mnemonic"})
_PHRASE_WORDS = lazy_compile(r"(?:[ \t]++(?!#)\S{1,64}+(?!\S)){0,32}+")
# 12 to 25 words of a wordlist (BIP39's are 3 to 8 letters): a phrase whatever its words, some
# of which (sample, example, replace) would otherwise mark an example value.
_RECOVERY_PHRASE = lazy_compile(r"[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,24}\Z")
_PASS_NAME = lazy_compile("pass(?:word|wd|phrase|code)?")
# Alone (not client_secret), these often name a stored secret rather than hold one.
_BARE_KEYWORDS = frozenset({"secret", "credential"})
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
# "key" alone is too common (sort_key, cache key); only these qualifiers make it a credential.
_KEY_QUALIFIER = lazy_compile(
    r"(?:api|access|secret|private|signing|encryption|master|auth|client|account|app|license|"
    r"subscription|fernet|preshared|hmac|jwt)"
    r"[_\-. ]?\Z"
)
# What may follow the credential word in a name and still leave it the credential's name: an
# environment, a rotation or a version (API_KEY_PROD, SECRET_KEY_BASE, GITHUB_TOKEN_2), never
# another noun (TOKEN_URL, PASSWORD_HASH, KEY_ID).
_NAME_QUALIFIERS = (
    r"(?:[_\-.](?:prod|production|live|dev|development|staging|stage|stg|test|testing|qa|uat|"
    r"sandbox|local|base|old|new|prev|previous|next|current|primary|secondary|backup|main|"
    r"default|v?[0-9]{1,3}))*"
)
# blanks, then a colon right before the value's quote: psql's :'variable'
_PSQL_VARIABLE = lazy_compile(r"[ \t]+:")
# R's member of a list or data frame, `creds$password`, `config$db$password`
_R_MEMBER = lazy_compile(r"[A-Za-z.][A-Za-z0-9._]*(?:\$[A-Za-z.][A-Za-z0-9._]*)+")
# What a personal access token is made of: `pat` also names a pattern in code, whose value holds
# a format's or a glob's marks.
_TOKEN_CHARACTERS = lazy_compile(r"[A-Za-z0-9_\-]{20,}")
# the end of a credential's name, which an = inside a value must not follow
_NOT_A_NAME = "".join(
    f"(?<!{name})" for name in ("pass", "word", "pwd", "pw", "phrase", "code", "mnemonic", "secret")
) + "".join(f"(?<!{name})" for name in ("token", "pat", "key", "credential", "credentials"))
_ASSIGNMENT_TAIL = (
    _NAME_QUALIFIERS + r"[\"']?[ \t]{0,8}(?:=>|:=|==?|:|<-)[ \t]{0,8}"
    rf"(?:{QUOTED_VALUES}|"
    # an & inside a value is kept unless a query parameter (&name=) follows, and an = when more
    # of the value follows it (a Django key, `django-insecure-k=0z...`) and it does not end
    # another credential's name (`api_key=api_key=`: names, not a value); an = ending it is
    # padding
    r"((?:[^\s\"'`,;&=(){}\[\]<>]|&(?![a-z_][a-z0-9_.\-]{0,64}=)"
    rf"|{_NOT_A_NAME}=++(?=[^\s\"'`,;&=(){{}}\[\]<>])){{1,256}}+=*))"
)
_AWS_SECRET = lazy_compile(
    r"secret_?access_?key[\"']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}[\"']?"
    r"([a-z0-9/+]{40})(?![a-z0-9/+=])"
)


# An ARN names a resource by its type and a colon (`arn:aws:secretsmanager:eu-west-1:
# 123456789012:secret:prod/db-AbCdEf`): the name of where a secret is kept, not its value
_ARN_BEFORE = lazy_compile(r"arn:[a-z0-9\-]{1,16}:[a-z0-9\-]{1,32}:[a-z0-9\-]{0,32}:[0-9]{12}:\Z")
_ARN_REACH = 96


def _assignment_finder(keyword: str, pattern: str) -> Finder:
    compiled = lazy_compile(pattern + _ASSIGNMENT_TAIL)
    plain = keyword in _PLAIN_KEYWORDS

    def find(text: str, lowered: str) -> Iterator[Span]:
        if keyword not in lowered:
            return
        test_log: bool | None = None  # whether `text` is a test suite's log, once asked
        # a value a text repeats is judged once (a page of settings was judged per setting)
        generated = functools.cache(looks_random)
        credential = functools.cache(is_credential_literal)
        sections: dict[int, bool] = {}  # whether a line is in an INI section, once asked
        for match in every_match(compiled, lowered):
            if keyword == "pat" and match.start() > 0 and lowered[match.start() - 1].isalnum():
                continue
            if keyword == "key" and not _KEY_QUALIFIER.search(
                lowered, max(0, match.start() - 16), match.start()
            ):
                continue
            if lowered[match.start() - 1 : match.start()] == ":" and _ARN_BEFORE.search(
                lowered, max(0, match.start() - _ARN_REACH), match.start()
            ):
                continue
            if keyword == "pass" and _go_test_result(text, match.start()):
                continue
            if keyword == "pass" and _test_result(text, match.start()):
                if test_log is None:
                    test_log = _is_test_log(text)
                if test_log:
                    continue
            group = 1 if match.start(1) >= 0 else 2 if match.start(2) >= 0 else 3
            start, end = match.span(group)
            name_end = match.start() + len(keyword)
            if keyword == "pass":
                name_end = _PASS_NAME.match(lowered, match.start()).end()  # type: ignore[union-attr]
            if (
                group == 3
                and "<-" in lowered[name_end:start]
                and (_R_MEMBER.fullmatch(text, start, end) or not generated(text[start:end]))
            ):
                # what R's <- (or Haskell's) assigns unquoted is code, `creds$password` a
                # list's member: a literal it assigns is quoted
                continue
            if group == 3 and plain and lowered[name_end:start].strip("\"' \t") == ":":
                default = _ANNOTATED_DEFAULT.match(text, end)  # password: str = "hunter2"
                if default is not None:
                    group = 1 if default.start(1) >= 0 else 2
                    start, end = default.span(group)
            if group == 3 and text[start] == "-" and lowered[start - 1] == ":":
                start += 1  # a shell's default, `${DB_PASSWORD:-value}`: the value after `:-`
                if start == end:
                    continue
            if group == 3 and end < len(text) and text[end] in "([":
                continue  # a call or subscript such as os.environ["X"]
            if group != 3 and _PSQL_VARIABLE.fullmatch(lowered, name_end, start - 1):
                continue  # psql's `PASSWORD :'new_password'`: a variable set elsewhere
            if group == 3 and text[end - 1] == ":" and "==" in lowered[name_end:start]:
                end -= 1  # `if token == Literal:` ends a block header, not the value
                if start == end:
                    continue
            if group == 3 and keyword in _PHRASE_KEYWORDS:
                end = _PHRASE_WORDS.match(text, end).end()  # type: ignore[union-attr]
            if keyword in _PHRASE_KEYWORDS and _RECOVERY_PHRASE.match(lowered, start, end):
                yield start, end
                continue
            value = text[start:end]
            if keyword == "pat" and _TOKEN_CHARACTERS.fullmatch(value) is None:
                continue  # code's short name for a pattern: "__attr_%s", "*.py"
            if group == 3 and plain:
                first_word_end = end
                end = _rest_of_setting(text, match.start(), end)
                name = text[match.start() : name_end]
                if name.isupper():  # an environment value: all of it
                    value = text[start:end]
                elif (  # a config file's value of several words: a passphrase, or prose
                    end > first_word_end
                    and name.islower()
                    and not _bare_name(keyword, lowered, match.start())
                    and keyword not in _PHRASE_KEYWORDS
                    and is_phrase_value(text[start:end])
                ):
                    yield start, end
                    continue
            if generated(value):
                yield start, end
            elif plain or keyword == "credential":
                before = lowered[match.start() - 1] if match.start() else " "
                if name_end - match.start() == 4 and keyword == "pass" and before.isalnum():
                    continue  # bypass, compass
                if credential(
                    value,
                    quoted=group != 3,
                    upper_key=text[match.start() : name_end].isupper(),
                    bare=_bare_name(keyword, lowered, match.start()),
                ) or (
                    group == 3
                    and plain
                    and _ini_literal(value)
                    and _in_ini_section(text, match.start(), sections)
                ):
                    yield start, end

    return find


# `PASS: gdb.base/break.exp: run to main`: a test suite's result line (Automake, DejaGnu),
# which starts its line. A text holding two result lines or more that name a test as suites do
# (a path, or three words or more), or three result lines or more of two outcomes or more
# ("PASS: addr2line" beside "FAIL: objdump -d"), is a test log, and each `PASS:` line in it a
# result. Logins listed one after another ("USER: admin" / "PASS: Monkey123") name no test
# that way and have no other outcome, so their passwords are still found.
_TEST_RESULT = lazy_compile(r"PASS:[ \t]")
_OUTCOMES = r"X?PASS|X?FAIL|KPASS|KFAIL|SKIP|ERROR|UNSUPPORTED|UNRESOLVED|UNTESTED"
_TEST_RESULTS = lazy_compile(
    rf"^[ \t]*(?:{_OUTCOMES}):[ \t]+(?:[^\s/]*/|\S+[ \t]+\S+[ \t]+\S)", re.MULTILINE
)
_ANY_RESULT = lazy_compile(rf"^[ \t]*({_OUTCOMES}):[ \t]+\S", re.MULTILINE)
_RESULTS_OF_TWO_OUTCOMES = 3
# Automake's summary of a run (`# TOTAL: 3`, then `# PASS:  3`): its results are a test log's
_TEST_SUMMARY = lazy_compile(r"^# TOTAL:[ \t]+[0-9]+[ \t]*\r?\n# PASS:[ \t]+[0-9]+", re.MULTILINE)
# `go test -v`: `--- PASS: TestLogin (0.00s)`, a subtest's indented under it; the test's time
# marks the line
_GO_TEST_RESULT = lazy_compile(r"PASS:[ \t]+\S+[ \t]+\([0-9]+\.[0-9]+s\)")
_GO_RESULT_MARK = "--- "


def _go_test_result(text: str, at: int) -> bool:
    mark = at - len(_GO_RESULT_MARK)
    return (
        mark >= 0
        and text.startswith(_GO_RESULT_MARK, mark)
        and _starts_line(text, mark)
        and _GO_TEST_RESULT.match(text, at) is not None
    )


def _test_result(text: str, at: int) -> bool:
    return _TEST_RESULT.match(text, at) is not None and _starts_line(text, at)


def _starts_line(text: str, at: int) -> bool:
    """Whether only spaces and tabs are before `at` on its line. Looks back over those alone:
    a search for the line's start went back to the text's start on a line with no end."""
    before = at
    while before > 0 and text[before - 1] in " \t":
        before -= 1
    return before == 0 or text[before - 1] == "\n"


def _is_test_log(text: str) -> bool:
    results = _TEST_RESULTS.finditer(text)
    if next(results, None) is not None and next(results, None) is not None:
        return True
    if _TEST_SUMMARY.search(text) is not None:
        return True
    outcomes = [match.group(1) for match in _ANY_RESULT.finditer(text)]
    return len(outcomes) >= _RESULTS_OF_TWO_OUTCOMES and len(set(outcomes)) >= 2


def _bare_name(keyword: str, lowered: str, at: int) -> bool:
    """`secret` or `credentials` alone, not the last part of a longer name (client_secret)."""
    return keyword in _BARE_KEYWORDS and (at == 0 or lowered[at - 1] not in _NAME_CHARACTERS)


# A setting that starts its line (.env, YAML, INI: `SESSION_SECRET=keyboard cat`) has the rest
# of the line as its unquoted value, up to a comment; words only, so that code is not taken.
_SETTING_NAME = lazy_compile(r"[ \t]*(?:export[ \t]+|-[ \t]+)?[A-Za-z0-9_.\-]*\Z")
_MORE_WORDS = lazy_compile(
    r"(?:[ \t]+(?!#)[^\s\"'`;&|(){}\[\]<>=]{1,64}+){1,16}+(?=[ \t]*(?:#|\r?$))", re.M
)


def _rest_of_setting(text: str, name: int, end: int) -> int:
    """Where the unquoted value of the setting whose name holds `name` and whose first word
    ends at `end` really ends: the end of its line's words when the setting starts the line."""
    line = text.rfind("\n", max(0, name - 129), name) + 1  # (no further back than it can be)
    if name - line > 128 or _SETTING_NAME.match(text, line, name) is None:
        return end
    more = _MORE_WORDS.match(text, end)
    if more is None or any(word[0] == "-" or "/" in word for word in more.group().split()):
        return end  # a flag or a path: a command run with the setting (PGPASSWORD=x psql -h db)
    return more.end()


# An INI file's section (`[pypi]` in .pypirc, `[client]` in my.cnf) holds settings, not code:
# an unquoted value there is a literal, a word or dotted (`password = hunter2.long.value`),
# where in code `password = cfg.password` names a variable. The section's header is looked
# for over the settings, comments and blank lines above the setting's line, a bounded way.
_INI_HEADER = lazy_compile(r"[ \t]*\[[A-Za-z0-9_.:\- \"]{1,64}\][ \t]*\r?\Z")
_INI_LINE = lazy_compile(r"[ \t]*(?:[#;].*|[A-Za-z0-9_.\-]{1,64}[ \t]*[=:].*|)\r?\Z")
_INI_LINES_ABOVE = 32


def _ini_literal(value: str) -> bool:
    """A value in an INI section that is a literal: not a placeholder, path or other store,
    nor a constant's name in capitals (`validate_password = FORCE_PLUS_PERMANENT`, MySQL's)."""
    return (
        len(value) >= 4
        and not is_placeholder(value)
        and (not is_reference(value) or is_dotted_name(value))
        and not (value.isupper() and value.replace("_", "").isalpha())
    )


def _in_ini_section(text: str, at: int, known: dict[int, bool]) -> bool:
    """Whether the setting whose name is at `at` starts its line in an INI file's section;
    `known` holds the answers for the lines of settings above, each read once, so that a page
    of settings is not read again from each of its lines up to its header."""
    line = text.rfind("\n", max(0, at - 129), at) + 1
    if at - line > 128 or _SETTING_NAME.match(text, line, at) is None:
        return False
    if line not in known:
        known[line] = _section_above(text, line, known)
    return known[line]


def _section_above(text: str, end: int, known: dict[int, bool]) -> bool:
    for _ in range(_INI_LINES_ABOVE):
        if end == 0:
            return False
        start = text.rfind("\n", max(0, end - 1 - 1024), end - 1) + 1
        if start == 0 and end - 1 > 1024:
            return False
        if start in known:
            return known[start]
        if _INI_HEADER.match(text, start, end - 1) is not None:
            return True
        if _INI_LINE.match(text, start, end - 1) is None:
            return False
        end = start
    return False


# After a type annotation, the default a name is declared with: `: Optional[str] = "..."`.
_ANNOTATED_DEFAULT = lazy_compile(
    r"(?:\[[^\]\n]{0,64}\])?[ \t]*=[ \t]*"
    rf"(?:{QUOTED_VALUES})"
)


def _find_aws_secret(text: str, lowered: str) -> Iterator[Span]:
    if "access" not in lowered:
        return
    for match in every_match(_AWS_SECRET, lowered):
        start, end = match.span(1)
        if looks_random(text[start:end]):
            yield start, end


# An AWS secret key right after its access key id ("AKIA… / Ix9M…", "AKIA…:Ix9M…", two
# columns): 40 characters of base64 that look generated, a separator or blanks between them
_AWS_PAIR = lazy_compile(
    r"(?<![A-Z0-9])A(?:KIA|SIA)[A-Z0-9]{16}[ \t]*(?:[/:,;|][ \t]*|[ \t]|\r?\n)"
    r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


def find_aws_secret_after_id(text: str, lowered: str) -> Iterator[Span]:
    """The secret access key written right after its key id."""
    if "AKIA" not in text and "ASIA" not in text:
        return
    for match in _AWS_PAIR.finditer(text):
        start, end = match.span(1)
        if looks_random(text[start:end]):
            yield start, end


# A URL query's key= or auth= (Firebase, many web APIs): a generated value there is a key;
# `key` and `auth` alone are too common for the assignment rule. A presigned URL's signature
# and session token (S3's X-Amz-Signature, Cloud Storage's X-Goog-Signature, CloudFront's
# Signature) let whoever holds the URL in until it expires.
_QUERY_KEY = lazy_compile(
    r"[?&](?:key|auth|x-(?:amz|goog)-(?:signature|security-token)|signature)="
    r"([^&#\s\"'<>]{16,2048}+)"
)
_QUERY_KEY_LITERALS = ("key=", "auth=", "signature=", "token=")


def _find_query_keys(text: str, lowered: str) -> Iterator[Span]:
    if not any(literal in lowered for literal in _QUERY_KEY_LITERALS):
        return
    for match in _QUERY_KEY.finditer(lowered):
        start, end = match.span(1)
        if looks_random(text[start:end]):
            yield start, end


# `password: _PasswordType | None = None`, `private_key: Ed25519PrivateKey | Ed448PrivateKey`:
# a name annotated with a type (a union, or a default after it) is code, not a credential
_ANNOTATED_NAME = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_AFTER_A_TYPE = lazy_compile(r"[ \t]*(?:\|[ \t]*[A-Za-z_]|=(?!=))")


def _type_annotation(text: str, start: int, end: int) -> bool:
    return (
        _ANNOTATED_NAME.fullmatch(text, start, end) is not None
        and text[max(0, start - 8) : start].rstrip(" \t").endswith(":")
        and _AFTER_A_TYPE.match(text, end) is not None
    )


def _not_annotations(finder: Finder) -> Finder:
    """`finder` without the values that are type annotations."""

    def find(text: str, lowered: str) -> Iterator[Span]:
        for start, end in finder(text, lowered):
            if not _type_annotation(text, start, end):
                yield start, end

    return find


_ASSIGNMENT_FINDERS = tuple(
    _not_annotations(_assignment_finder(keyword, pattern))
    for keyword, pattern in _ASSIGNMENT_KEYWORDS
)
