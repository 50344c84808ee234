"""Password hashes after a user's name: an htpasswd line (`admin:$apr1$…`, `deploy:$2y$05$…`,
`ops:{SHA}…=`) or an /etc/shadow one (`root:$6$…:19000:0:99999:7:::`).

Pure module: no I/O. A hash is not the password, but one from a file that guards a login is
read back by a cracker in hours when the password was weak, so it is kept out of memory as the
password is. Only a hash in crypt's or htpasswd's form that starts its line after a name and a
colon counts, whatever note follows it after a blank: a format string in code (`"$6$%s$%s"`)
or a hash's name in prose does not.
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import Span

_CRYPT = (
    r"\$(?:apr1|1|5|6|md5|sha1)\$(?:rounds=[0-9]{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}"
    r"|\$2[abxy]\$[0-9]{2}\$[./A-Za-z0-9]{53}"
    r"|\$(?:y|gy|7)\$[./A-Za-z0-9]{1,64}\$[./A-Za-z0-9]{1,64}\$[./A-Za-z0-9]{22,86}"
    r"|\$argon2(?:id|i|d)\$v=[0-9]{1,3}\$m=[0-9]{1,8},t=[0-9]{1,3},p=[0-9]{1,3}"
    r"\$[A-Za-z0-9+/]{8,88}\$[A-Za-z0-9+/]{16,128}"
    r"|\{S?SHA\}[A-Za-z0-9+/]{27,80}={0,2}"
)
# A hash follows its name's colon: the colons before a `$` or a `{` are found in one pass (a
# literal the engine skips ahead to: 0.7 ms a megabyte, where looking for each scheme's marker
# took 6), then the name before each is read back to its line's start.
_COLON_BEFORE_HASH = lazy_compile(r":(?=[${])")
# (after a list's bullet or a quote's mark: "- admin:$apr1$…", "> admin:$apr1$…")
_NAME_LEADING_LINE = lazy_compile(
    r"(?:^|\n)[ \t]*(?:[-*>][ \t]+)?[A-Za-z0-9_][A-Za-z0-9_.@\-]{0,63}\Z"
)
_LONGEST_LEAD = 80
# The hash ends at its line's end, a shadow line's next colon, or a blank before a note pasted
# after it (`admin:$apr1$…  <- from .htpasswd`); never inside a longer run (`…%s`).
_HASH = lazy_compile("(?:" + _CRYPT + r")(?=[\s:]|\Z)")


def find_password_hashes(text: str, lowered: str) -> Iterator[Span]:
    """The hash of an htpasswd or a shadow line."""
    for colon in _COLON_BEFORE_HASH.finditer(text):
        at = colon.start()
        if _NAME_LEADING_LINE.search(text, max(0, at - _LONGEST_LEAD), at) is None:
            continue
        hashed = _HASH.match(text, at + 1)
        if hashed is not None:
            yield hashed.span()
