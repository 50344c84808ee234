"""Secret detection and redaction for text that may be stored or sent.

Pure module: no I/O. The rules: token formats and other shaped secrets (`secret_formats`,
with the token table in `secret_tokens`), `name = value` assignments (`secret_assignments`),
and credentials in plain words: command lines (`secret_commands`) and what commands print
(`secret_command_outputs`), netrc and other files (`secret_files`), sentences and PINs
(`secret_sentences`, `secret_stated_keys`, `secret_foreign_sentences`, `secret_pins`,
`secret_spaced`, `secret_app_passwords`, `secret_logins`), notes and pairs (`secret_notes`,
`secret_colon_pairs`, `secret_strong_pairs`), second factors (`secret_second_factor`) and
recovery phrases and unseal keys (`secret_recovery`), each asking `secret_values` what a value
is; values a line break cuts are read joined (`secret_wrapped`, `secret_cut_values`). Token
rules are skipped outright when their trigger literal is absent from the text's long unbroken
runs (`secret_gates`), so the common no-secret path is one pass to find those runs plus a few
substring searches. Text holding characters no reader sees (a
zero-width space inside a token) is read a second time without them (`secret_invisible`), and
text holding Markdown's emphasis or code marks or full-width forms is read as a reader sees it
(`secret_markdown`); string literals that code joins are read joined (`secret_joined`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from orcad.lazy_patterns import lazy_compile
from orcad.secret_app_passwords import find_app_passwords
from orcad.secret_assignments import (
    _ASSIGNMENT_FINDERS,
    _ASSIGNMENT_KEYWORDS,
    _find_aws_secret,
    _find_query_keys,
    _not_annotations,
    find_aws_secret_after_id,
)
from orcad.secret_code_credentials import find_code_credentials
from orcad.secret_colon_pairs import find_colon_pairs
from orcad.secret_command_inputs import STDIN_TRIGGERS, find_piped_passwords
from orcad.secret_command_outputs import COMMAND_OUTPUT_RULES
from orcad.secret_commands import (
    find_credential_flags,
    find_encoded_pairs,
    find_oracle_connects,
    find_oracle_jdbc_passwords,
    find_piped_and_batch_passwords,
    find_redis_passwords,
)
from orcad.secret_config_lines import find_config_line_credentials
from orcad.secret_cut_values import find_cut_values
from orcad.secret_files import (
    find_login_pairs,
    find_markup_credentials,
    find_netrc_passwords,
    find_pgpass_passwords,
    find_sql_passwords,
    find_yaml_block_credentials,
)
from orcad.secret_foreign_sentences import find_foreign_passwords
from orcad.secret_formats import (
    DISCORD_BOT,
    ENCODED_JWT_TRIGGER,
    ENCODED_PEM_TRIGGER,
    Finder,
    anchored_finder,
    find_authorization,
    find_azure_client_secret,
    find_azure_sas_signature,
    find_bare_userinfo,
    find_braintree_tokens,
    find_discord_bot,
    find_encoded_jwts,
    find_encoded_private_keys,
    find_key_file_ids,
    find_openshift_tokens,
    find_private_keys,
    find_putty_keys,
    find_registry_auth,
    find_salesforce_tokens,
    find_sentry_dsns,
    find_session_cookies,
    find_telegram,
    find_twilio_auth_tokens,
    find_url_credentials,
    find_wif_keys,
    may_hold_wif,
    token_finder,
)
from orcad.secret_gates import Gate, _always, _any_trigger, _long_runs, _token_gate, _TriggerGate
from orcad.secret_hashes import find_password_hashes
from orcad.secret_invisible import VisibleText, visible_text
from orcad.secret_joined import joined_literals
from orcad.secret_logins import find_login_passwords
from orcad.secret_markdown import marked_lines
from orcad.secret_notes import find_noted_passwords
from orcad.secret_pins import find_access_codes, find_pin_settings
from orcad.secret_recovery import find_recovery_phrases, find_seed_words, find_unseal_keys
from orcad.secret_second_factor import (
    find_grouped_seeds,
    find_recovery_codes,
    find_totp_seeds,
    may_hold_seed,
)
from orcad.secret_sentences import find_stated_passwords
from orcad.secret_spaced import find_spaced_passwords
from orcad.secret_stated_keys import find_stated_keys
from orcad.secret_strong_pairs import find_strong_pairs
from orcad.secret_tables import find_table_passwords
from orcad.secret_tokens import ANCHORED_RULES, TOKEN_RULES
from orcad.secret_values import CUT_VALUE, VALUE_RUN
from orcad.secret_wifi_keys import find_wifi_keys, find_wifi_qr_keys, find_wifi_statements
from orcad.secret_wrapped import WrappableRule, find_wrapped_tokens

__all__ = [
    "SecretMatch",
    "contains_secret",
    "find_secrets",
    "redact",
    "secret_kinds",
    "shorten_redacted",
]


@dataclass(frozen=True, slots=True)
class SecretMatch:
    rule: str
    start: int
    end: int


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _lowered(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a few code points lower to two; keep offsets aligned
        lowered = text.translate(_ASCII_LOWER)
    return lowered


# ------------------------------------------------------------------ rule table
_RULES: tuple[tuple[str, Finder, Gate], ...] = (
    ("private_key_block", find_private_keys, _always),
    ("private_key_block", find_encoded_private_keys, _any_trigger((ENCODED_PEM_TRIGGER,))),
    *(
        (
            name,
            token_finder(name, triggers, pattern, bounded),
            _token_gate(triggers, pattern, bounded),
        )
        for name, triggers, pattern, bounded in TOKEN_RULES
    ),
    ("jwt", find_encoded_jwts, _any_trigger((ENCODED_JWT_TRIGGER,))),
    ("telegram_bot_token", find_telegram, _always),
    ("discord_bot_token", find_discord_bot, lambda runs: DISCORD_BOT.search(runs) is not None),
    *(
        (name, anchored_finder(literal, head, pattern), _any_trigger((literal,)))
        for name, literal, head, pattern in ANCHORED_RULES
    ),
    ("azure_ad_client_secret", find_azure_client_secret, _always),
    ("azure_sas_signature", find_azure_sas_signature, _always),
    ("braintree_token", find_braintree_tokens, _always),
    ("credential_assignment", find_wif_keys, may_hold_wif),
    ("twilio_api_key", find_twilio_auth_tokens, _any_trigger(("AC",))),
    ("openshift_token", find_openshift_tokens, _always),
    ("salesforce_access_token", find_salesforce_tokens, _always),
    ("sentry_dsn", find_sentry_dsns, _always),
    ("putty_private_key", find_putty_keys, _any_trigger(("PuTTY-User-Key-File-",))),
    ("url_credentials", find_url_credentials, _always),
    ("url_credentials", find_bare_userinfo, _always),
    ("url_credentials", find_oracle_jdbc_passwords, _always),
    ("aws_secret_access_key", _find_aws_secret, _always),
    ("aws_secret_access_key", find_aws_secret_after_id, _any_trigger(("AKIA", "ASIA"))),
    ("credential_assignment", _find_query_keys, _always),
    ("credential_assignment", find_key_file_ids, _always),
    ("authorization_header", find_authorization, _always),
    ("registry_auth", find_registry_auth, _always),
    ("session_cookie", find_session_cookies, _always),
    ("totp_seed", find_totp_seeds, may_hold_seed),  # before assignments: `MFA_SECRET=<seed>`
    ("totp_seed", find_grouped_seeds, _always),
    *(("credential_assignment", finder, _always) for finder in _ASSIGNMENT_FINDERS),
    # "the api key is 3f9a...": a generated value given in words, an assignment without `=`
    ("credential_assignment", _not_annotations(find_stated_keys), _always),
    ("credential_assignment", find_markup_credentials, _always),
    ("credential_assignment", find_yaml_block_credentials, _always),
    ("credential_assignment", find_code_credentials, _always),
    ("credential_assignment", find_recovery_phrases, _always),
    ("credential_assignment", find_seed_words, _always),
    ("password_flag", find_credential_flags, _always),
    ("password_flag", find_encoded_pairs, _always),
    ("password_flag", find_piped_and_batch_passwords, _always),
    ("password_flag", find_oracle_connects, _always),
    ("password_flag", find_piped_passwords, _any_trigger(STDIN_TRIGGERS)),
    *COMMAND_OUTPUT_RULES,  # what a command printed below it (`security … -w`, ...)
    ("credential_assignment", find_redis_passwords, _always),
    ("credential_assignment", find_config_line_credentials, _always),
    ("credential_assignment", find_wifi_keys, _always),
    ("credential_assignment", find_wifi_qr_keys, _always),
    ("credential_assignment", find_sql_passwords, _always),
    ("credential_assignment", find_pin_settings, _always),
    ("netrc_password", find_netrc_passwords, _always),
    ("pgpass_password", find_pgpass_passwords, _always),
    ("password_statement", _not_annotations(find_stated_passwords), _always),
    ("password_statement", find_foreign_passwords, _always),
    ("password_statement", find_login_pairs, _always),
    ("password_statement", find_login_passwords, _always),
    ("password_statement", find_colon_pairs, _always),
    ("password_statement", find_strong_pairs, _always),
    ("password_statement", find_table_passwords, _always),
    ("password_statement", find_spaced_passwords, _always),
    ("password_statement", find_app_passwords, _always),
    ("password_statement", find_noted_passwords, _always),
    ("password_statement", find_access_codes, _always),
    ("password_statement", find_wifi_statements, _always),
    ("password_statement", find_unseal_keys, _always),
    ("recovery_codes", find_recovery_codes, _always),
    ("password_hash", find_password_hashes, _always),
)
_PRIORITY = {name: index for index, (name, _, _) in enumerate(_RULES)}
# (a literal every match holds, rule, finder): a setting is read by the rules its name names
_ASSIGNMENT_RULES = (
    ("access", "aws_secret_access_key", _find_aws_secret),
    *(
        (keyword, "credential_assignment", finder)
        for (keyword, _), finder in zip(_ASSIGNMENT_KEYWORDS, _ASSIGNMENT_FINDERS, strict=True)
    ),
)

RULE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for name, _, _ in _RULES))


# Every other gate is false without a long run (a test checks it): most text needs no gate.
_ALWAYS_OPEN = tuple((name, finder) for name, finder, gate in _RULES if gate is _always)
# Rules whose every match holds an assignment operator (`=`, `:` or R's `<-`): eight full scans
# of the text for their keywords are skipped, for the price of three short ones, without one.
_NEED_AN_OPERATOR = frozenset(
    (
        _find_aws_secret,
        _find_query_keys,
        find_yaml_block_credentials,
        find_pgpass_passwords,
        find_pin_settings,
        find_colon_pairs,
        *_ASSIGNMENT_FINDERS,
    )
)
_ALWAYS_OPEN_WITHOUT_OPERATOR = tuple(
    (name, finder) for name, finder in _ALWAYS_OPEN if finder not in _NEED_AN_OPERATOR
)


_DEDUPLICATE_RUNS_OVER = 4_096


# The rules by the trigger literals that open them (their gates are _TriggerGate), and the
# other gated rules (tried one by one), as indexes into _RULES.
_BY_TRIGGER: dict[str, list[int]] = {}
for _index, (_name, _finder, _gate) in enumerate(_RULES):
    if isinstance(_gate, _TriggerGate):
        for _trigger in _gate.triggers:
            _BY_TRIGGER.setdefault(_trigger, []).append(_index)
_TRIGGERS = tuple(_BY_TRIGGER)
_ALWAYS_INDEXES = frozenset(index for index, rule in enumerate(_RULES) if rule[2] is _always)
_OTHER_GATED = tuple(
    index
    for index, (_, _, gate) in enumerate(_RULES)
    if gate is not _always and not isinstance(gate, _TriggerGate)
)


def _open_rules(text: str) -> Iterable[tuple[str, Finder]]:
    """The rules that can match somewhere in `text`: those whose gate opens on its long runs
    (the same as asking each rule's gate, in the rules' order)."""
    runs = _long_runs(text)
    if len(runs) > _DEDUPLICATE_RUNS_OVER:  # code repeats its names: test each trigger once
        runs = " ".join(set(runs.split(" ")))
    has_operator = "=" in text or ":" in text or "<-" in text
    if not runs:
        return _ALWAYS_OPEN if has_operator else _ALWAYS_OPEN_WITHOUT_OPERATOR
    opened = set(_ALWAYS_INDEXES)
    for trigger in [trigger for trigger in _TRIGGERS if trigger in runs]:
        opened.update(
            index
            for index in _BY_TRIGGER[trigger]
            if index not in opened and _RULES[index][2](runs)  # (its pattern, if it has one)
        )
    opened.update(index for index in _OTHER_GATED if _RULES[index][2](runs))
    return [
        (name, finder)
        for name, finder, _ in (_RULES[index] for index in sorted(opened))
        if has_operator or finder not in _NEED_AN_OPERATOR
    ]


# The token formats read across a line break (`secret_wrapped`): a pattern with no quantifier
# of a range or `+`, `*`, `?` has one length
# (and an AWS secret key, 40 characters after its name, as in `AWS_SECRET_ACCESS_KEY=...`)
_WRAPPABLE = (
    *(
        WrappableRule(
            name,
            triggers,
            token_finder(name, triggers, pattern, bounded),
            re.search(r"\{\d+,|[+*?]", pattern) is None,
        )
        for name, triggers, pattern, bounded in TOKEN_RULES
        if bounded
    ),
    WrappableRule("aws_secret_access_key", ("ACCESS", "access"), _find_aws_secret, True),
)


def find_secrets(text: str) -> list[SecretMatch]:
    """Every secret in `text`, sorted by start; overlapping detections are merged. A secret
    split by characters no reader sees (a zero-width space, a soft hyphen), or a token a line
    break cuts in two, is found too."""
    return _find_all(text, _other_readings(text))


def _find_all(text: str, readings: list[tuple[VisibleText, bool]]) -> list[SecretMatch]:
    """`find_secrets`, with `text`'s other readings (`_other_readings`) already made."""
    found = _find_secrets(text)
    more = [SecretMatch(*wrapped) for wrapped in find_wrapped_tokens(text, _WRAPPABLE)]
    detected = [(match.rule, match.start, match.end) for match in found]
    more.extend(SecretMatch(*cut) for cut in find_cut_values(text, detected, _assignments))
    for reading, lines_apart in readings:
        for match in _find_secrets(reading.text, _COMMAND_RULES if lines_apart else frozenset()):
            if lines_apart and "\n" in reading.text[match.start : match.end]:
                continue  # it joins lines the reading put side by side, which may be far apart
            more.append(SecretMatch(match.rule, *reading.span(match.start, match.end)))
    joined = joined_literals(text)
    if joined is not None:
        joins = joined.joins
        for match in _find_secrets(joined.reading.text):
            at = bisect.bisect_right(joins, match.start)
            if at < len(joins) and joins[at] < match.end:  # a token only the join makes
                more.append(SecretMatch(match.rule, *joined.reading.span(match.start, match.end)))
    if not more:
        return found
    return _merged(sorted(found + more, key=lambda match: (match.start, -match.end)))


# Not read in Markdown without its marks: a command in backticks is one named in prose, and
# what follows it no output of it (a flag's value is found with the marks, within them).
_COMMAND_RULES = frozenset({"password_flag"})


def _other_readings(text: str) -> list[tuple[VisibleText, bool]]:
    """`text` read as a reader sees it, when that differs, each mapped back onto `text`:
    without characters no reader sees (`secret_invisible`), and then its lines that may name a
    credential in Markdown or in full-width forms, without Markdown's marks and with those
    forms as ASCII (`secret_markdown`); with whether the reading is of lines set side by side
    (a match across two of them is none, and the command-line rules are not asked of them)."""
    readings = []
    visible = visible_text(text)
    if visible is not None:
        readings.append((visible, False))
    base = text if visible is None else visible.text
    lines = marked_lines(base)
    if lines is not None:
        if visible is not None:  # its positions in `text`, through the visible reading's
            lines = VisibleText(lines.text, [visible.positions[at] for at in lines.positions])
        readings.append((lines, True))
    return readings


def _assignments(setting: str) -> list[tuple[str, int, int]]:
    """The assignment rules' detections in one setting joined to its value's line."""
    lowered = _lowered(setting)
    return [
        (name, start, end)
        for keyword, name, finder in _ASSIGNMENT_RULES
        if keyword in lowered
        for start, end in finder(setting, lowered)
    ]


def _merged(matches: list[SecretMatch]) -> list[SecretMatch]:
    """Sorted `matches` with each overlapping run made one (named by its first)."""
    merged: list[SecretMatch] = []
    for match in matches:
        if merged and match.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = SecretMatch(last.rule, last.start, max(last.end, match.end))
        else:
            merged.append(match)
    return merged


def _find_secrets(text: str, skipped: frozenset[str] = frozenset()) -> list[SecretMatch]:
    """The secrets the rules find in `text`, but those of the rules named in `skipped`."""
    if not text:
        return []
    lowered = _lowered(text)
    candidates = [
        (start, -end, _PRIORITY[name], name)
        for name, finder in _open_rules(text)
        if name not in skipped
        for start, end in finder(text, lowered)
    ]
    if not candidates:
        return []
    candidates.sort()
    merged: list[SecretMatch] = []
    rule, start, end = candidates[0][3], candidates[0][0], -candidates[0][1]
    for next_start, negative_end, _, next_rule in candidates[1:]:
        if next_start >= end:
            end = _through_value(text, end)
        if next_start < end:  # overlap: redact the union so no fragment survives
            end = max(end, -negative_end)
            continue
        merged.append(SecretMatch(rule, start, end))
        rule, start, end = next_rule, next_start, -negative_end
    merged.append(SecretMatch(rule, start, _through_value(text, end)))
    return merged


def _through_value(text: str, end: int) -> int:
    """Where a detection ending at `end` really ends: a finder's length bound (256 characters
    of a value) can cut a long one, such as a 1,000-character session token, whose tail must
    go too. The rest of a run of key-material characters the cut went through is taken."""
    if 0 < end < len(text) and CUT_VALUE.fullmatch(text, end - 1, end + 1):
        return VALUE_RUN.match(text, end).end()  # type: ignore[union-attr]
    return end


def contains_secret(text: str) -> bool:
    if not text:
        return False
    readings = _other_readings(text)
    if readings:  # (made once: a long text's lines in Markdown cost a pass of their own)
        return bool(_find_all(text, readings))
    lowered = _lowered(text)
    return any(
        next(finder(text, lowered), None) is not None for _, finder in _open_rules(text)
    ) or (
        next(find_wrapped_tokens(text, _WRAPPABLE), None) is not None
        or next(find_cut_values(text, (), _assignments), None) is not None
    )


def secret_kinds(text: str) -> str:
    """The kinds of secret in `text`, named for a refusal ("password_statement, jwt"); never
    a value. Empty when there is none."""
    return ", ".join(dict.fromkeys(match.rule for match in find_secrets(text)))


def _replace(text: str, matches: list[SecretMatch]) -> str:
    pieces: list[str] = []
    position = 0
    for match in matches:
        pieces.append(text[position : match.start])
        pieces.append(f"[REDACTED:{match.rule}]")
        position = match.end
    pieces.append(text[position:])
    return "".join(pieces)


# Passes over text that already held secrets; in practice the second finds nothing.
_MAX_REDACTION_PASSES = 16


def redact(text: str) -> str:
    """`text` with each secret replaced by ``[REDACTED:<rule>]``.

    A replacement changes its neighbours' surroundings (a token glued to a key block gains
    a word boundary), so text that held secrets is scanned again until nothing matches.
    """
    matches = find_secrets(text)
    passes = 0
    while matches and passes < _MAX_REDACTION_PASSES:
        text = _replace(text, matches)
        matches = find_secrets(text)
        passes += 1
    return text


_MARKER = lazy_compile(r"\[REDACTED:[^\]\s]*\]")
ELLIPSIS = "…"


def shorten_redacted(redacted: str, max_chars: int, *, keep_end: bool = False) -> str:
    """Text `redact` has already been through, cut to at most `max_chars` characters with an
    ellipsis marking the cut: its start is kept, or its end with `keep_end`.

    Redact the whole text before shortening it: a secret cut first loses the prefix or suffix
    that made it recognisable. A cut that would split a ``[REDACTED:<rule>]`` marker moves off
    the marker instead, so the kept text never holds half of one.
    """
    if len(redacted) <= max_chars:
        return redacted
    room = max(max_chars - len(ELLIPSIS), 0)
    cut = len(redacted) - room if keep_end else room
    for marker in _MARKER.finditer(redacted):
        if marker.start() < cut < marker.end():
            cut = marker.end() if keep_end else marker.start()
    return ELLIPSIS + redacted[cut:] if keep_end else redacted[:cut] + ELLIPSIS
