"""What the offline heuristic extractor refuses to keep, whatever rule recognised it. Pure.

Spec, What Is Captured: transient task state, credentials and unverified claims are rejected;
and a statement its user takes back in the next sentence was never a fact.
"""

from __future__ import annotations

import re

from orcad.lazy_patterns import lazy_compile

_FLAGS = re.IGNORECASE

_REDACTED = lazy_compile(r"redacted", _FLAGS)
_CREDENTIAL_WORD = lazy_compile(
    r"\b(?:passwords?|passwd|passphrase|secrets?|tokens?|api[ _-]?keys?|private keys?|credentials?"
    r"|creds?|ssh keys?|bearer|pw|pwd|passcodes?)\b"
    # `pass` as a noun: "the ftp pass is summer", "the grafana admin pass: X" (not "the tests pass")
    r"|\bpass\s+(?:is|was|for)\b|\b(?:admin|root|user|db|database|ftp|wifi|wi-fi|ssh|vpn|default"
    r"|login|app|account|acct|master|the|my|our|its|their)\s+pass\b"
    # what opens a door, an alarm or an account: "the door code is 4471", "the pin on the
    # routers is 123456" (not "we pin node 20")
    r"|\b(?:recovery|backup|unlock|door|alarm|gate|lock|keypad|entry|access|2fa|mfa|totp)\s+codes?\b"
    r"|\bpins?\b[^.;!?\n]{0,60}?\b(?:is|was|are)\s+\d{4,}"
    # an account and its password in one: "admin / Oreo2022", "guest / rainbowkitten",
    # "qa@acme.test / Marvin42", "admin/Winter2023!" (not "the admin/ folder")
    r"|\b(?:admin|administrator|root|guest|user|sa|ops|test)\s+/\s+\S"
    r"|\b(?:admin|administrator|root|guest)/(?=\S*\d)\S|[\w.+-]+@[\w.-]+\s+/\s+\S",
    _FLAGS,
)
# spec, What Is Captured: private values are rejected. Personal data: what a person's own
# contact details, identity, card or bank numbers are ("my email is ...", "my credit card ends
# in ...", "her personal phone is ..."), and what anyone's identity or card number is ("Bob's
# passport number is ..."); not a team's shared contact ("security reports go to
# security@example.com"), a payment feature ("we take credit cards") or a habit ("I read on
# my phone a lot")
_PERSONAL = lazy_compile(
    r"\b(?:my|(?:his|her|their)\s+(?:personal|private|home))\s+"
    r"(?:(?:personal|private|home|work|own)\s+)?"
    r"(?:e-?mail|phone|cell|mobile|address|birthday|date of birth|salary|ssn|social security"
    r"|passport|iban|bank(?:\s+account)?|(?:credit\s+|debit\s+)?card|driver'?s licen[cs]e"
    r"|licen[cs]e plate|tax id|national id)"
    r"(?:\s+(?:number|no\.?|address|id))?\s*(?:is|was|:|=|ends|starts|expires)(?!\w)"
    r"|\b(?:ssn|social security (?:number|no)|passport (?:number|no)|date of birth"
    r"|(?:credit|debit) card (?:number|no)|bank account (?:number|no)|routing number"
    r"|driver'?s licen[cs]e (?:number|no))\s*(?:is|was|:|=)(?!\w)",
    _FLAGS,
)
_TRANSIENT = lazy_compile(
    r"\b(?:today|tonight|tomorrow|yesterday|right now|for now|at the moment|currently|this session"
    r"|this time|this turn|temporarily|for the time being|next steps?|in progress|wip|todo"
    r"|this week|next week)\b",
    _FLAGS,
)
# spec, What Is Captured: unverified claims are rejected; a claim its own user hedges is one.
# A hedging adverb is a lowercase word of its own: "the Maybe type", "possibly-null" name things.
_UNSURE = lazy_compile(
    r"\b(?:i\s+(?:think|guess|believe|suppose)|not\s+(?:\d+%\s+)?(?:sure|certain)"
    r"|if\s+i\s+(?:remember|recall)|iirc|afaik|as\s+far\s+as\s+i\s+know)\b"
    r"|(?<!-)(?-i:\b(?:probably|maybe|perhaps|possibly)\b)(?!-)",
    _FLAGS,
)
# A sentence that takes back the one before it ("Always use tabs. Actually, scratch that."),
# alone or before a correction ("Wait, no, we use yarn."): most phrases must end their clause.
_INTERJECTIONS = r"(?:(?:oh|wait|actually|hmm|sorry|no|nope)\b[,!.]?\s*)*"
_TAKE_BACK_PHRASE = (
    r"(?:(?:scratch|strike|ignore|disregard|forget)\s+(?:that|it)|never\s?mind|just kidding"
    r"|no|nope|my (?:mistake|bad)|i was wrong"
    r"|that(?:'s| is| was) (?:wrong|not right|not true|outdated|out of date))(?=\s*(?:[,.!;:]|$))"
)
_SAID_OUTDATED = r"(?:not anymore|that was the old|that(?:'s| is) no longer)\b"
_TAKEN_BACK = lazy_compile(rf"^{_INTERJECTIONS}(?:{_TAKE_BACK_PHRASE}|{_SAID_OUTDATED})", _FLAGS)
# the state of the work now, said as the whole fact ("The build is broken.", not a rule about
# it such as "Never deploy when the build is broken.")
_STATE_NOW = lazy_compile(
    r"^(?:the|our)\s[\w\s-]{0,60}?\b(?:is|are)\s+(?:(?:currently|still)\s+)?"
    r"(?:broken|failing|down|red|ready for review)\b(?!-)"
    r"|\b(?:this|next)\s+sprint\b"
    r"|\buntil\s+the\s+end\s+of\s+the\s+(?:day|week|sprint)\b",
    _FLAGS,
)


def refused(fact: str) -> bool:
    """Whether a recognised fact names a secret or personal data, the state of the work now,
    or is hedged."""
    return any(
        pattern.search(fact)
        for pattern in (_REDACTED, _CREDENTIAL_WORD, _PERSONAL, _TRANSIENT, _UNSURE, _STATE_NOW)
    )


# what the fact classifier keeps is the user's sentence as written, whatever its shape, so a
# value the redaction missed would be stored with it: a sentence that speaks of logging in, of
# a pass or a user name, or of a webhook is not kept that way ("its pass is Xk29ab77", "the
# admin console login is root with toor", "admin / hunter2 gets you in")
_LOGIN_WORDS = lazy_compile(
    r"\b(?:pass|passes|logins?|log\s*in|log\s*on|sign\s*in|signs?\s+in\s+with|user\s*names?"
    r"|usernames?|user\s+(?:is|id|name)|gets\s+you\s+in|webhooks?|hooks\.slack\.com"
    r"|(?:root|admin)\s+with|with\s+(?:root|admin)\b|unlocks?|acct|accounts?\s+is"
    r"|codes?\s+(?:is|was|for)\b)"
    # an account or a network said to be a value: "root on the legacy box is trustno1", "the
    # nextcloud admin is Dexter2013", "root is root@localhost lemonadestand", "the wifi in the
    # cabin is Cheddar!88"
    r"|\b(?:root|admin|administrator|guest|wi-?fi|ssid|router)\b[^.;!?\n]{0,40}?\b(?:is|was)\s+"
    r"(?:\S*[a-z]\S*\d|\d\S*[a-z]|\d{4,}|\S*@)"
    r"|\bkeys?\s+(?:is|was)\s+(?:\S*[a-z]\S*\d|\d\S*[a-z]|\d{4,})",
    _FLAGS,
)
# ... unless it says how one logs in without a value of its own: through an identity provider,
# a key or a device ("kibana logins go through okta", "you sign in with google", "aws console
# logins need a yubikey"), with no word that mixes letters and digits, long number, "a / b" pair
# or address in it
_SIGN_IN_MEANS = lazy_compile(
    r"\b(?:sso|saml|oauth2?|oidc|okta|auth0|google|github|gitlab|microsoft|azure\s+ad|entra"
    r"|yubikeys?|passkeys?|1password|bitwarden|vault|teleport|tsh|tailscale|vpn|mfa|2fa"
    r"|ssh\s+keys?|certificates?|kerberos|ldap|active\s+directory|webauthn|iam)\b",
    _FLAGS,
)
_VALUE_LIKE = lazy_compile(r"\S*[a-z]\S*\d|\d\S*[a-z]|\d{4,}|\S\s*/\s*\S|\S@\S", _FLAGS)


def refused_verbatim(fact: str) -> bool:
    """Whether a sentence kept as written (by the fact classifier, not by a rule that parsed
    it) speaks of how to log in, where a value the redaction missed may sit."""
    if not _LOGIN_WORDS.search(fact):
        return False
    return not _SIGN_IN_MEANS.search(fact) or bool(_VALUE_LIKE.search(fact))


def taken_back(sentence: str) -> str | None:
    """What follows the words that take the previous sentence back ("" when nothing does), or
    None when `sentence` takes nothing back."""
    matched = _TAKEN_BACK.match(sentence.strip())
    if matched is None:
        return None
    return sentence.strip()[matched.end() :].lstrip(" ,.!;:")
