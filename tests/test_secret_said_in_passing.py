"""Credentials mentioned in passing in a chat, each next to the look-alikes its rule must leave:
a plain word a verb gives for a password, and a login's `pass` after what it is for."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a plain word a verb gives for a password, ending its clause
        ("the password is bananabread, configure the test device", "bananabread"),
        ("my password is summer", "summer"),
        ("the password for the lab router is android.", "android"),
        ("the password is literally just summer", "summer"),
        ("the vpn passphrase is lighthouse", "lighthouse"),
        # a login's `pass` after what it is for: any password a verb gives
        ("remember the grafana admin pass is rex2019, i always forget it", "rex2019"),
        ("the admin panel pass is pa55word lol", "pa55word"),
        ("ok so the ftp pass is literally just summer", "summer"),
        ("the wifi pass for the iot vlan is blackcoffee, update the sensors", "blackcoffee"),
        ("the root pass is Kx9pL2mQ7v.", "Kx9pL2mQ7v"),
    ],
)
def test_said_in_passing_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # what a password is like, whose or where it is
        "the password is fine, nothing to change",
        "the password is optional for local dev",
        "the password is useless without the key",
        "the password is mandatory on prod",
        "the password is yours to pick",
        "the password is different on staging",
        "the password is somewhere in the vault",
        "the password is temporary, rotate it",
        "the password is expiring soon",
        "the password is obligatory",
        "the password is separate",
        "the password is private",
        "the password is mypasswordhere",
        "the passphrase is unlocking slowly",
        # a plain word the clause goes on after
        "the password is android as usual",
        # other words between the name and its verb
        "the password timeout is forever",
        # `pass` for no login: a compiler's, a linter's, a ticket's; or said of a login's pass
        "the first pass is slow",
        "the lint pass is green now",
        "the compiler pass is flaky.",
        "a boarding pass is needed",
        "the admin pass is required",
        "the root pass is disabled",
        "the db pass is rotated nightly",
        "the ftp pass is somewhere",
        "the user pass is optional",
        "the ssh pass is sha256 hashed",
        "the admin pass is v2",
    ],
)
def test_said_in_passing_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []
