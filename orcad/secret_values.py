"""What a value next to a credential's name is: key material, a chosen password, or a reference.

Pure module: no I/O. The secret detector asks two questions of a value it found after a name
such as `password` or `api_key`: does it look generated (`looks_random`, for names that are as
often ordinary words, like token and key), and is it a literal at all (`is_credential_literal`,
for names that only ever hold a credential, like password and client_secret, where a
human-chosen `hunter2` is as secret as random bytes). Placeholders and references are neither.
The value bounds say where a value ends: at the length bound, its closing quote, the
punctuation after it or the end of its clause. The finders of the shapes that carry no
`name = value` operator ask these questions: `secret_commands` (command lines), `secret_files`
(netrc, .pgpass, SQL, markup, YAML blocks, login pairs), `secret_sentences` and
`secret_foreign_sentences` (passwords stated in words), `secret_notes` (passwords jotted down
as notes: "the wifi key is X", "jenkins: admin / X") and `secret_pins` (PINs).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

Span = tuple[int, int]

# Placeholders: a value holding one of these marks is an example or a template slot.
_PLACEHOLDER_MARKS = (
    "your",
    "example",
    "changeme",
    "change_me",
    "change-me",
    "changeit",
    "placeholder",
    "redacted",
    "dummy",
    "xxxx",
    "****",
    "....",
    "todo",
    "fixme",
    "replace",
    "insert",
    "sample",
    "_here",
    "<",
    ">",
    "{{",
    "}}",
    "${",
    "%(",
)
# A value that is only the name of what belongs there (separators ignored) holds nothing.
_PLACEHOLDER_NAMES = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "key",
        "credential",
        "credentials",
        "changeme",
        "none",
        "null",
        "nil",
        "undefined",
        "empty",
        "unset",
        "hidden",
        "masked",
        "required",
        "optional",
        "sensitive",
        "string",
        "str",
        "text",
        "bool",
        "boolean",
        "true",
        "false",
        "int",
        "integer",
        "number",
        "any",
        "object",
        "default",
        "mysecret",
        "mypassword",
        "secretpassword",
        "supersecret",
        "notasecret",
    }
)
_LONGEST_PLACEHOLDER_NAME = max(map(len, _PLACEHOLDER_NAMES))
_PLACEHOLDER_MARK = re.compile("|".join(map(re.escape, _PLACEHOLDER_MARKS)))
# References: a store, a file or another variable holds the value.
_REFERENCE_PREFIXES = (
    "~/",
    "./",
    "../",
    "/",
    "arn:",
    "vault:",
    "kms:",
    "sm:",
    "ref+",
    "env:",
    "file:",
    "secretref:",
    "op:",
)
# (a colon after one ends a block header in code: `if token == other.token:`)
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|->)[A-Za-z_][A-Za-z0-9_]*)+:?\Z")
# A part of a dotted value that no name is written as: a digit inside a word that holds a
# capital ("S3cret"; a name's digits end a word: `S3Client`, `Argon2Hasher`) or two digits
# inside one ("s3cr3t", where names have one run: `i18n`, `utf8mb4`), or a short word whose
# case goes up after a lower-case letter for one letter or two before a digit ("mPq2", "xK9";
# names go up for a word or an acronym: `mContext`, `mPwd2`, `iOS17`, `AspNetCore`):
# `my.S3cret.pass`, `Xk9.mPq2` are passwords with dots in them, where `config.db_password`
# and `self.mContext` are names.
_DIGIT_INSIDE_A_WORD = re.compile(r"[A-Za-z][0-9]+[a-z]")
_DIGITS_INSIDE_A_WORD = re.compile(r"[A-Za-z][0-9]+[A-Za-z]+[0-9]+[A-Za-z]")  # "s3cr3t"
_SHORT_FLIPPED_WORD = re.compile(r"(?=.*[a-z][A-Z][a-z]?[0-9])(?:[0-9]*[A-Za-z]){2,4}[0-9]*")


def written_as_password(part: str) -> bool:
    """Whether one part of a dotted or joined value is written as no name or label is."""
    if not part.islower() and _DIGIT_INSIDE_A_WORD.search(part) is not None:
        return True
    if _DIGITS_INSIDE_A_WORD.search(part) is not None:
        return True
    return _SHORT_FLIPPED_WORD.fullmatch(part) is not None


def is_dotted_name(value: str) -> bool:
    """`config.db.password`, `Foo::BAR`: a name in code, whatever its parts look like."""
    return _DOTTED_NAME.match(value) is not None


# Two or three capitalised words joined by dots, the last with a number of two digits or more
# glued to it ("Gato.Negro77"): how a password is chosen, where a class and its attribute are
# written `Config.Timeout`, `Settings.MaxRetries`, `Version.V2`
_TITLED_WORDS_AND_NUMBER = re.compile(r"[A-Z][a-z]{2,15}(?:\.[A-Z][a-z]{2,15}){1,2}[0-9]{2,6}\Z")


def _dotted_password(value: str) -> bool:
    return (
        any(map(written_as_password, value.split(".")))
        or _TITLED_WORDS_AND_NUMBER.match(value) is not None
    )


_PROJECT_ID = re.compile(r"(?:mem|job|cand|apr)_[0-9a-f]{32}\Z")
_YAML_TAG = re.compile(r"![A-Za-z]+\Z")
# A PowerShell cmdlet, Verb-Noun with one of its usual verbs (`$pw = ConvertTo-SecureString
# "X" -AsPlainText`, `$pw = Get-Content pw.txt`): a call that makes the value, not the value.
# Its noun is a compound (SecureString, CmsMessage, AzKeyVaultSecret) or one of the one-word
# nouns of the cmdlets that give a value; a password of two words joined the same way
# ("Get-Lucky", "Select-Lantern") names no cmdlet.
_POWERSHELL_CMDLET = re.compile(
    r"(?:Convert(?:To|From)|Get|Read|New|Import|Export|Unprotect|Protect|Invoke|Select)"
    r"-(?:[A-Z][a-z0-9]*[A-Z][A-Za-z0-9]{0,40}|"
    r"(?:Content|Credential|Secret|Host|Clixml|Csv|Json|Xml|Item|Object|Random|Guid|Date"
    r"|Variable|String|Expression|Clipboard|Command|Process|Service|Certificate|Value|Token"
    r"|Password|Key|Vault|Member|Unique|Alias|Location|Module|Job|Acl))\Z"
)
# Names and labels (tls-cert-2024, GITHUB_TOKEN_2, v1.2.3): every part is one kind of thing.
# atomic and possessive, so alternatives are ordered longest form first
_LABEL_PART = r"(?>[a-zA-Z]{1,3}+[0-9]{1,4}+|[A-Z][a-z]++|[a-z]++|[A-Z]++|[0-9]++)"
WORD_LIKE = re.compile(rf"{_LABEL_PART}(?:[\-_.+]{_LABEL_PART})*\Z")
_LETTERS_ONLY = re.compile(r"[A-Za-z_]+\Z")
# Words chosen as a password, joined as a label is: three or more capitalised ones
# (Orbit-Lantern-Velvet-9), or four or more long lower-case ones joined by hyphens, which code
# does not name things with (correct-horse-battery-staple). A label has shorter or fewer parts
# (tls-cert-2024, my-app-tls, X-Forwarded-For, get_user_password).
_CAPITALISED_WORD = re.compile(r"[A-Z][a-z]{2,}\Z")
_LONG_LOWER_WORD = re.compile(r"[a-z]{4,}\Z")
_LABEL_JOINS = re.compile(r"[\-_+]")
_PASSPHRASE_JOINS = re.compile(r"[\-_+.]")
_NUMBER_PART = re.compile(r"[0-9]{2,}\Z")
# One capitalised word of four letters or more and a number: the password people choose and
# are made to change, "Summer-2024", "Welcome.01" (not "Win-10", "Api-01": shorter words)
_SEASON_WORD = re.compile(r"[A-Z][a-z]{3,}\Z")
_LETTERS_AND_DIGITS = re.compile(r"(?=[^0-9]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{2,6}\Z")


def is_passphrase(value: str, *, names_a_password: bool = True) -> bool:
    """Whether `value`, which looks like a label (WORD_LIKE), is rather a passphrase: three
    capitalised words or more, or four long lower-case words; and for a key or sentence that
    names a password (not a bare `secret:`, which often names a stored secret, `Api-Gateway-01`),
    two capitalised words and a number (Purple-Monkey-42, Kestrel.Harbor.1987), or three parts
    or more that each mix letters and digits, two of them in both cases (Xk9-Lm2-Qp7: a
    generated password in groups, where `Win10-x64-V2` is a label)."""
    capitalised = sum(1 for part in _LABEL_JOINS.split(value) if _CAPITALISED_WORD.match(part))
    if capitalised >= 3:
        return True
    if sum(1 for part in value.split("-") if _LONG_LOWER_WORD.match(part)) >= 4:
        return True
    if not names_a_password:
        return False
    parts = _PASSPHRASE_JOINS.split(value)
    if sum(1 for part in parts if _CAPITALISED_WORD.match(part)) >= 2 and any(
        _NUMBER_PART.match(part) for part in parts
    ):
        return True
    if len(parts) == 2 and _SEASON_WORD.match(parts[0]) and _NUMBER_PART.match(parts[1]):
        return True
    grouped = len(parts) >= 3 and all(_LETTERS_AND_DIGITS.match(part) for part in parts)
    mixed = sum(1 for part in parts if not part.isupper() and not part.islower())
    return grouped and mixed >= 2


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s own character distribution."""
    length = len(value)
    if length == 0:
        return 0.0
    # H = log2(L) - sum(n log2 n) / L, with n log2 n looked up: this runs for every value
    counts = Counter(value).values()
    if length < len(_N_LOG_N):
        total = sum(map(_N_LOG_N.__getitem__, counts))
    else:
        total = sum(n * math.log2(n) for n in counts)
    return math.log2(length) - total / length


_N_LOG_N = [0.0] + [n * math.log2(n) for n in range(1, 1025)]


_CLASSES = (
    frozenset("abcdefghijklmnopqrstuvwxyz"),
    frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    frozenset("0123456789"),
)


def character_classes(value: str) -> int:
    """How many of lower case, upper case, digits and other characters `value` holds."""
    present = set(value)
    found = [not present.isdisjoint(kind) for kind in _CLASSES]
    other = len(present) > sum(len(present & kind) for kind in _CLASSES)
    return sum(found) + other


# `#{...}` whole: Spring's expression language or Ruby's interpolation reading the value from
# elsewhere (`#{systemProperties['db.password']}`, `#{ENV['DB_PASSWORD']}`); only whole, as
# `#{` may be typed inside a password
_EXPRESSION = re.compile(r"#\{[^{}\n]*\}\Z")


def is_placeholder(value: str) -> bool:
    """An example, template slot or masked value rather than a credential."""
    if not value or len(set(value)) <= 2:
        return True
    if value[0] in "$<{%*[(`?-" and not _generated_after_mark(value):
        return True
    if _EXPRESSION.match(value) is not None:
        return True
    lowered = value.lower()
    if _PLACEHOLDER_MARK.search(lowered) is not None:
        return True
    if "/" in lowered and _alnum(lowered.rsplit("/", 1)[1]) in _PLACEHOLDER_NAMES:
        return True  # a pair naming its parts: user/pass, username/password
    if len(value) > _LONGEST_PLACEHOLDER_NAME * 2:  # separators at most double a name
        return False
    return _alnum(lowered) in _PLACEHOLDER_NAMES


# what a flag, a format, a path or a variable holds after its `-` or `%` (`-XX:+UseG1GC`,
# `-I/usr/include`, `%2Fusr%2Flocal`, `%ProgramFiles(x86)%`, `-Dkey=value`)
_NOT_AFTER_A_MARK = frozenset("=/%:()$<>{}[]\\ ")


def _generated_after_mark(value: str) -> bool:
    """A generated password that starts with `-` or `%`, as one of a password manager's in
    twenty or so does: 10 characters or more after it, capitals, small letters and digits among
    them, none that a flag's, a format's or a path's shape has. (`-Xmx4096m` is too short.)"""
    rest = value[1:]
    return (
        value[0] in "-%"
        and len(rest) >= 10
        and rest[0].isalnum()
        and any(c.isupper() for c in rest)
        and any(c.islower() for c in rest)
        and any(c.isdigit() for c in rest)
        and _NOT_AFTER_A_MARK.isdisjoint(rest)
        and WORD_LIKE.match(rest) is None
    )


def _alnum(value: str) -> str:
    return "".join(char for char in value if char.isalnum())


# A secret store's path of words (`secret/data/db`, Vault's): where a credential is, not it
_STORE_PATH = re.compile(r"(?:secrets?|kv)/[a-z0-9_\-]+(?:/[a-z0-9_\-]+)*\Z")
# A name that ends with the kind of credential it names: `db-password`, `DEPLOY_TOKEN`,
# `client_secret` (words of letters joined by - _ or .)
_NAMED_KINDS = frozenset({"password", "passwd", "secret", "token", "credential", "credentials"})
_NAME_PARTS = re.compile(r"[-_.]")


def names_a_credential(value: str) -> bool:
    """`db-password`, `DEPLOY_TOKEN`, `secret/data/db`: the name or place of a credential, where
    a value is expected to be one (a bare `--secret` flag, a table's secret column); never
    taken so where a password is given, since `super-secret-password` is one too."""
    lowered = value.lower()
    parts = _NAME_PARTS.split(lowered)
    return _STORE_PATH.match(lowered) is not None or (
        len(parts) >= 2 and all(part.isalpha() for part in parts) and parts[-1] in _NAMED_KINDS
    )


def is_reference(value: str) -> bool:
    """Names another place that holds the credential: a variable, attribute, file or store."""
    return (
        "://" in value
        or _STORE_PATH.match(value.lower()) is not None
        or value.lower().startswith(_REFERENCE_PREFIXES)
        or (_DOTTED_NAME.match(value) is not None and not _dotted_password(value))
        or _PROJECT_ID.match(value) is not None
        or _YAML_TAG.match(value) is not None
        or _POWERSHELL_CMDLET.match(value) is not None
    )


def _case_changes(value: str) -> int:
    changes = 0
    previous_upper: bool | None = None
    for char in value:
        if char.isalpha():
            upper = char.isupper()
            if previous_upper is not None and upper != previous_upper:
                changes += 1
            previous_upper = upper
    return changes


def looks_random(value: str) -> bool:
    """True when an assigned value looks like generated key material, not a word or code."""
    length = len(value)
    if length < 8 or is_placeholder(value) or is_reference(value) or WORD_LIKE.match(value):
        return False
    classes = character_classes(value)
    entropy = shannon_entropy(value)
    if value.replace("_", "").replace("-", "").isalpha():
        # letters only: random strings flip case often, identifiers and words rarely do
        return length >= 16 and entropy >= 3.5 and _case_changes(value) * 4 >= length
    if length < 12:
        return classes >= 3 and entropy >= 2.75
    return classes >= 2 and entropy >= 3.0


def mixes_letters_and_others(value: str) -> bool:
    """Letters with digits or symbols, as a chosen password has and a word does not."""
    # a word, the usual value, is told in C without a look at each character in Python
    if value.isalpha() or not any(c.isalpha() for c in value):
        return False
    # a word of a script whose vowels are marks (Hindi's "आवश्यक") holds letters alone
    return value.isascii() or not all(
        c.isalpha() or unicodedata.category(c)[0] == "M" for c in value
    )


def is_credential_literal(value: str, *, quoted: bool, upper_key: bool, bare: bool) -> bool:
    """Whether `value`, given for a password- or secret-named key, is a credential.

    Entropy does not matter: `hunter2` is a password. Unquoted, a value can also be code (a
    variable, a type), so there it must look unlike an identifier, unless the key is an
    upper-case environment name, whose value is always a literal. A bare `secret`/`credentials`
    key often names a stored secret (Kubernetes), so its value must mix letters and digits.
    """
    if is_placeholder(value) or is_reference(value):
        return False
    if bare:
        named = is_label(value, names_a_password=False)
        return len(value) >= 6 and mixes_letters_and_others(value) and not named
    if quoted:
        return len(value) >= 4
    if value.isdigit():
        return len(value) >= 4
    if _LETTERS_ONLY.match(value) or is_label(value):
        return upper_key and len(value) >= 4
    return len(value) >= 4


def is_label(value: str, *, names_a_password: bool = True) -> bool:
    """A name or label (tls-cert-2024, GITHUB_TOKEN_2, v1.2.3), not words chosen as a password
    (see is_passphrase for `names_a_password`)."""
    return (
        WORD_LIKE.match(value) is not None
        and not is_passphrase(value, names_a_password=names_a_password)
        and not any(map(written_as_password, _PASSPHRASE_JOINS.split(value)))
    )


# Words that make a setting's value of several words prose or code rather than a passphrase:
# English function words, the verbs that point elsewhere, and the keywords of an expression
# (`password = the one in the vault`, `password: ask ops for it`, `password = a if b else c`).
PROSE_OR_CODE_WORDS = frozenset(
    (
        "the", "a", "an", "this", "that", "these", "those", "its", "their", "our", "your", "my",
        "his", "her", "some", "any", "no", "each", "every", "all", "it", "they", "we", "you",
        "one", "ones", "in", "on", "at", "of", "to", "for", "from", "with", "without", "by",
        "via", "into", "as", "per", "than", "about", "after", "before", "until", "and", "or",
        "not", "nor", "but", "if", "else", "elif", "then", "is", "are", "was", "were", "be",
        "been", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could",
        "should", "must", "may", "might", "see", "ask", "use", "same", "set", "unset", "stored",
        "kept", "managed", "generated", "rotated", "required", "needed", "provided", "given",
        "lambda", "await", "yield", "new", "typeof", "none", "null", "nil", "true", "false",
    )
)  # fmt: skip


_OPERATOR = re.compile(r"[+\-*/%^|&!~<>]+\Z")


def is_phrase_value(value: str) -> bool:
    """Whether the unquoted value of several words that a lower-case setting ends its line with
    (`password = open sesame 42`, `db_password: correct horse battery`) is a passphrase: no
    word of prose or code among them (nor an operator, a keyword argument, a list's comma, a
    reference), not a placeholder, and not a name in capitals (`pwd: Jim Meyering`)."""
    words = value.split()
    return (
        len(words) >= 2
        and not is_placeholder(value)
        and not all(word.istitle() and word.isalpha() for word in words)
        and not any(
            word.lower() in PROSE_OR_CODE_WORDS
            or ":" in word
            or word.endswith(",")
            or _OPERATOR.match(word) is not None
            or is_reference(word)
            for word in words
        )
    )


def given_password(value: str) -> bool:
    """A value after a password flag or keyword: at least 4 characters, not a flag, example
    or reference (documentation writes `-p X` and `password PASS`)."""
    return (
        len(value.rstrip(TRAILING)) >= 4
        and value[0] != "-"
        and not is_placeholder(value)
        and not is_reference(value)
    )


# what a login or an account has, which is no user's name when it stands where a user would:
# "the login form / SignupPage2", "the login page / Dashboard2" name two things of an app
PARTS_OF_A_LOGIN = frozenset(
    ("form", "forms", "flow", "flows", "page", "pages", "screen", "screens", "view", "views",
     "button", "modal", "dialog", "popup", "endpoint", "endpoints", "route", "routes", "api",
     "service", "server", "handler", "component", "components", "test", "tests", "step",
     "steps", "link", "url", "path", "field", "fields", "logic", "code", "module",
     "controller", "template", "layout", "window", "prompt", "error", "errors", "bug", "issue",
     "ticket", "story", "feature", "redirect", "callback", "hook", "request", "response",
     "timeout", "limit", "settings", "menu", "widget", "panel", "section", "tab", "box",
     "time", "times", "attempt", "attempts")
)  # fmt: skip


# a hash's, an encoding's, a platform's or a release's name and number ("amd64", "win10", "v2")
VERSIONED_NAME = re.compile(
    r"(?:sha|md|utf|aes|rsa|x|arm|amd|i|win|v|py|python|node|java|jdk|go|ipv|http|tls)[_\-]?"
    r"[0-9][0-9a-z._\-]*\Z"
)


def is_chosen_password(value: str) -> bool:
    """A password a pair gives: letters with digits or symbols, or digits alone, 4 or more."""
    return (
        len(value) >= 4
        and (mixes_letters_and_others(value) or value.isdigit())
        and not is_placeholder(value)
        and not is_reference(value)
    )


# ------------------------------------------------------------------ value bounds
# Characters of key material (base64, hex, URL-safe tokens): a detection the length bound cut
# between two of them (CUT_VALUE) takes the rest of the run (`secrets.find_secrets`).
CUT_VALUE = re.compile(r"[A-Za-z0-9+/]{2}")
VALUE_RUN = re.compile(r"[A-Za-z0-9+/=_\-]*")


def _quoted_value(quote: str) -> str:
    """A value in `quote`s (one group): closed, or still going on where the bound cuts it, so
    that a long quoted token is found at all."""
    return rf"{quote}([^{quote}\n]{{1,256}}+)(?:{quote}|(?=[^{quote}\n]))"


QUOTED_VALUES = _quoted_value('"') + "|" + _quoted_value("'")  # two groups


def value_span(match: re.Match[str]) -> tuple[int, int, bool]:
    for group in range(1, (match.lastindex or 0) + 1):
        if match.start(group) >= 0:
            return match.start(group), match.end(group), group < 3 and match.re.groups == 3
    return match.start(), match.end(), False


# The verb a sentence gives a value with: "is", "was", "is now", "changed to", "was reset to"
STATED_VERB = (
    r"(?:[ \t]+(?:is|was|are|becomes|became|reads|(?:changed|reset|set)[ \t]+to)"
    r"(?:[ \t]+(?:now|still|just|literally|actually|simply|currently|always|also|again|"
    r"probably|likely|usually|"
    r"(?:changed|reset|set|updated)[ \t]+to)){0,2}"
    # "my password, it's X": the name set apart, then said ("it's now X": said again after
    # a change)
    r"|[ \t]*,[ \t]+(?:it's|it\u2019s|it[ \t]+is|that's|which[ \t]+is)(?:[ \t]+(?:now|still))?"
    # "the db password changed. It is now X": said in a sentence of its own after a change
    r"|[ \t]*[.;][ \t]+(?:it's|it\u2019s|it[ \t]+is)[ \t]+now"
    # "the password's X": the verb run into the name
    r"|['\u2019]s(?=[ \t]))"
)


TRAILING = ".,;:)]}`'\""
CLAUSE_ENDS = ".,;:!?)"


def value_ends_clause(text: str, value_end: int, stripped_end: int) -> bool:
    """The value ends its clause: punctuation follows it (a dash set apart by blanks too: "the
    creds are admin/Winter2024!xq - remember that"), or the line or the text ends."""
    if any(char in CLAUSE_ENDS for char in text[stripped_end:value_end]):
        return True
    rest = text[value_end : value_end + 8].lstrip(" \t")
    if rest[:1] in ("-", "\u2013", "\u2014") and rest[1:2] in (" ", "\t"):
        return len(rest) < len(text[value_end : value_end + 8])  # blanks before the dash too
    return not rest or rest[0] in "\r\n("


def end_before_trailing(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in TRAILING:
        end -= 1
    return end


# ------------------------------------------------------------ statements on their own line
_MAX_INDENTATION = 64


def line_start_before(lowered: str, at: int, prefixes: tuple[str, ...]) -> int | None:
    """Where the line of the word at `at` starts, when only indentation and at most one of
    `prefixes` (a tool's prompt, `SQL>`; a name's part, `wpa_`) come before the word on it;
    None otherwise. Looks back a bounded way, so that text of many such words on one line
    costs no more than its length."""
    window = max(0, at - _MAX_INDENTATION)
    before = lowered[window:at].rstrip(" \t")
    for prefix in prefixes:
        if before.endswith(prefix):
            before = before[: -len(prefix)].rstrip(" \t")
            break
    start = window + len(before)
    return start if start == 0 or lowered[start - 1] == "\n" else None
