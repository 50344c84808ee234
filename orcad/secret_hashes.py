"""Password hashes after a user's name: an htpasswd line (`admin:$apr1$…`, `deploy:$2y$05$…`,
`ops:{SHA}…=`) or an /etc/shadow one (`root:$6$…:19000:0:99999:7:::`).

Pure module: no I/O. A hash is not the password, but one from a file that guards a login is
read back by a cracker in hours when the password was weak, so it is kept out of memory as the
password is. Only a hash in crypt's or htpasswd's form that starts its line after a name and a
colon counts: a format string in code (`"$6$%s$%s"`) or a hash's name in prose does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import Span

_CRYPT = (
    r"\$(?:apr1|1|5|6|md5|sha1)\$(?:rounds=[0-9]{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}"
    r"|\$2[abxy]\$[0-9]{2}\$[./A-Za-z0-9]{53}"
    r"|\$(?:y|gy|7)\$[./A-Za-z0-9]{1,64}\$[./A-Za-z0-9]{1,64}\$[./A-Za-z0-9]{22,86}"
    r"|\$argon2(?:id|i|d)\$v=[0-9]{1,3}\$m=[0-9]{1,8},t=[0-9]{1,3},p=[0-9]{1,3}"
    r"\$[A-Za-z0-9+/]{8,88}\$[A-Za-z0-9+/]{16,128}"
    r"|\{S?SHA\}[A-Za-z0-9+/]{27,80}={0,2}"
)
# a name, its colon and a hash that ends its field (the line, or shadow's next colon)
_HASHED_LINE = re.compile(
    r"^[ \t]*[A-Za-z0-9_][A-Za-z0-9_.@\-]{0,63}:(" + _CRYPT + r")(?=[ \t]*\r?$|:)", re.MULTILINE
)
_MARKERS = ("$apr1$", "$1$", "$5$", "$6$", "$2", "$y$", "$gy$", "$7$", "$argon2", "sha}")


def find_password_hashes(text: str, lowered: str) -> Iterator[Span]:
    """The hash of an htpasswd or a shadow line."""
    if not any(marker in lowered for marker in _MARKERS):
        return
    for match in _HASHED_LINE.finditer(text):
        yield match.span(1)
