"""Redaction time against input size, on inputs built to be slow: each rule family's trigger
words, their look-alikes and long runs without separators, repeated to a size and to twice it.

A hook sends up to 2 MiB of a turn and the Stop hook waits 20 s for it, so redaction must stay
linear: the ratio of the time at twice the size to the time at the size is about 2 when it is.

Run: python bench/redaction_scaling.py                  # 256 KiB and 512 KiB
     python bench/redaction_scaling.py --size 1024      # 1 MiB and 2 MiB
     python bench/redaction_scaling.py --against REV    # also the detector of git revision REV
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from redaction import load_detector  # noqa: E402

from orcad.secrets import redact  # noqa: E402

KIB = 1024
MEGABYTE = 1_000_000
SESSION = "Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3Kd8"
# What is repeated, by the rule family it aims at.
ADVERSARIAL = {
    "cookie headers": f"cookie: session={SESSION} ",
    "cookie words": "cookie:",
    "curl cookies": f"curl -b sid={SESSION} ",
    "password settings": "password=hunter2 ",
    "env settings": "PASSWORD=hunter2 ",
    "test results": "PASS: x ",
    "mnemonic phrases": "mnemonic = apple bread ",
    "secret names": "secret: x ",
    "api keys": "api_key=abc ",
    "bearer headers": "Authorization: Bearer x ",
    "url passwords": "https://user:pass@host ",
    "key blocks": "-----BEGIN PRIVATE KEY-----\n",
    "stated passwords": "the password is hunter2 ",
    "spaced passwords": "wifi password Xk9#mm2pq. ",
    "password words": "password reset ",
    "stated keys": "my api key is ",
    "password flags": "--password x ",
    "netrc lines": "machine host login u password p ",
    "pgpass lines": "host:5432:db:user:pw\n",
    "xml elements": "<password>x</password>",
    "yaml blocks": "password:\n  value\n",
    "sql passwords": "IDENTIFIED BY 'x' ",
    "pins": "pin: 1234 ",
    "pins of owners": "my PIN for the vpn token is 583920 PIN for the a b c d ",
    "passphrases with numbers": "with passphrase 'correct horse battery 99' passphrase is a b ",
    "the pins": "the pin is 4821 sim pin 0000 ",
    "pins after parts": "gpio the pin is 2047\n",
    "login pairs": "user: admin\npass: x\n",
    "login slashes": "login: a / ",
    "foreign words": "contraseña: x ",
    "foreign keys": "la clave es Xk9#mm2pq Schlüssel: ",
    "foreign spaces": "Passwort Geheim2024! пароль qwerty123 ",
    "foreign spaces going on": "contraseña Xk9#mm2 para Passwort a@b2 und ",
    "foreign words spaced": "Kennwort Passwort senha ",
    "token prefixes": "ghp_xoxb-sk-eyJ",
    "jwt heads": "eyJ",
    "aws secret names": "secret_access_key=",
    "quotes left open": 'password = "',
    "one letter": "a",
    "no separators": "password",
    "zero-width": "pass\u200bword=x ",
    "soft hyphens": "password=hun\u00adter2 ",
    "curl users": "curl -u user:pass ",
    # what a command reads from its input or protects (orcad/secret_command_inputs.py)
    "piped passwords": "echo Xk9mm2pqLw | docker login --password-stdin ",
    "stdin flags": "--password-stdin ",
    "echoes into stdin": "echo x | " * 40 + "docker login --password-stdin\n",
    "secure strings": 'ConvertTo-SecureString "Xk9mm2pqLw" -AsPlainText ',
    "passwd stdin": "echo Xk9#mm2 | passwd --stdin bob\n",
    "passwd stdin words": "x | passwd --stdin ",
    "oracle logons": "sqlplus -s scott/Tiger123@orcl ",
    "oracle commands": "sqlplus -s -l ",
    "oracle connects": "SQL> conn hr/Welcome1@pdb\n",
    "conn words": "conn connect SQL> conn ",
    "wifi passphrases": "wpa_passphrase MyNet Xk9#mm2pq\n",
    "wifi passphrase commands": "wpa_passphrase ",
    # Wi-Fi keys (orcad/secret_wifi_keys.py): settings, nmcli, and the word alone on one line
    "wifi keys": '    psk="Xk9#mm2pq"\n',
    "nmcli wifi keys": "nmcli c modify a wifi-sec.psk Xk9#mm2pq\n",
    "psk words": "wpa_psk psk ",
    # app passwords in four groups (orcad/secret_app_passwords.py), and prose after the name
    "app passwords": "app password: abcd efgh ijkl mnop ",
    "app password words": "app password this will work fine for each user ",
    "app password runs": "app password qwzxhjkpvbnmrtyu misunderstanding ",
    # what a command printed below it (orcad/secret_command_outputs.py)
    "keychain outputs": "security find-generic-password -s a -w\nXk9#mm2pq\n",
    "keychain commands": "security find-generic-password -w ",
    "heroku tokens": "heroku auth:token\n \u203a Warning\n",
    "storage keys": '"keyName": "key1", "value": "' + "Ab1+" * 21 + 'Ab==", key1 ',
    "storage key rows": "keyName key1 " + "A1b+" * 21 + "A1== ",
    # notes (orcad/secret_notes.py): keys, service pairs, logins' pw, passes
    "network keys": "the wifi key is BlueMango$42 ",
    "store keys": "the zip key for the backup is ",
    "service pairs": "jenkins: admin / Jenk1ns!2024 ",
    "tight pairs": "nexus: admin/Nexus@2024 ",
    "login pws": "jenkins login admin pw ",
    "passes for": "pass for jenkins: x ",
    "slashes": "/",
    "paths": "a/b",
    "cjk sentences": "我的密码是 Hunter2! ",
    "cjk spaces": "密码 Hunter2! ",
    "cjk sentences going on": "密码是 s3cr3t 请保管好 ",
    "cjk descriptions": "密码是 Base64 编码的 ",
    # tokens cut by a line break (orcad/secret_wrapped.py), and lines their triggers fill
    "wrapped tokens": "ghp_A1b2C3d4E5f6G7h8I9j0\nK1l2M3n4O5p6Q7r8 ",
    "trigger lines": "SKpatre_oy2r8_AC\nAPI-key-sk-ghp_npm_xai-\n",
    "tokens over lines": "ghp_A1b2C3d4E5f\n6G7h8I9j0K1l2M3\nn4O5p6Q7r8\n",
    "blocks of one width": "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n",
    "long lines": "word " * 52 + "Xk9mm2pqLwAbcdefghij\n",
    # values a line break cuts (orcad/secret_cut_values.py), and settings left empty
    "cut settings": "DB_PASSWORD=\nXk9#mm2pqLw\n",
    "empty settings": "PASSWORD=\nDB_USER=admin1\n",
    "settings left empty": "DB_PASSWORD=\n",
    "short settings": "a=\nabc123\n",
    "cut values": "docker run -e POSTGRES_USER=admin -e POSTGRES_PASSWORD=Xk9#mm\n2pqLw\n",
    # a user and password joined by a colon (orcad/secret_colon_pairs.py), and words alone
    "colon pairs": "creds admin:Hunter2! ",
    "announcing words": "login auth:",
    "pairs under words": "creds for db\nadmin:Hunter2!\n",
    "pair lines": "login\na:b1cd\n",
    "listed pairs": "1. a:Bcd1!\n",
    # second factors (orcad/secret_second_factor.py): seeds, code lists, their words alone
    "totp seeds": "2FA seed: JBSWY3DPEHPK3PXP ",
    "grouped seeds": "totp key: JBSW Y3DP EHPK 3PXP ",
    "seed words and groups": "otp ABCD EFGH IJKL MNOP ",
    "seed groups over lines": "two-factor ABCD EFGH\nIJKL MNOP\n",
    "factor words": "two-factor scale factor ",
    "recovery codes": "backup codes: 1a2b3-c4d5e ",
    # password hashes in htpasswd and shadow lines (orcad/secret_hashes.py)
    "hash lines": "admin:$apr1$O3JMY.Tw$AdLnLjQ/5jXF9.MTp3gHv/\n",
    "hash markers": "a:$2y$05$ $6$ $1$ {sha}",
    "fenced codes": "backup codes:\n```\n1a2b3-c4d5e\n```\n",
    "second factor words": "recovery code otp 2fa ",
    # a password given with a login in plain words (orcad/secret_logins.py)
    "logins as users": "ssh in as a with b ",
    "values to log in": "use a1! to log in ",
    "logins with ands": "log into x with a and b1!c ",
    "ands": " and a1! and",
    "verbs and ands": "log and sign and ",
    # a password around its name (orcad/secret_sentences.py)
    "values before names": "a1!b is the password ",
    "names set to": "set the pw to ",
    "arrows after names": "password -> ",
    "names run together": "passpwpass ",
    # a generated value right after a key's name (orcad/secret_stated_keys.py)
    "values after key names": "api key 4f9c2e7b8a1d3f6e0c5b9a2d ",
    "key names then words": "token abcdefghijklmnopqrstuvwxyz ",
    # a user and password before a host, no scheme (orcad/secret_formats.py)
    "bare userinfo": "a:b1cd@e.fg ",
    "at signs": "@",
    "colons before at signs": ":abcd@",
    # keytool's several password flags (orcad/secret_commands.py)
    "keytool flags": "keytool -storepass abcd -keypass efgh ",
    "keytool flags after one": "keytool -storepass abcd" + " -keypass efgh" * 2000 + "\n",
    # names and values held apart, and credentials by position (orcad/secret_code_credentials)
    "env names and values": "- name: DB_PASSWORD\n  value: a1!b\n",
    "names without values": "name: password_token_secret_key\n",
    "value lines": "value: ",
    "json names and values": '{"name": "X_TOKEN", "value": "a"}',
    "defines": "define('DB_PASSWORD', ",
    "subscripts": "['SECRET_KEY'] = ",
    "shell defaults": "${DB_PASSWORD:-",
    "terraform variables": 'variable "db_password" { ',
    "auth tuples": "auth=('a', ",
    "logins": "login(",
    "connect calls": "ssh.connect(h, 22, 'a', 'B1!c', 'd', ",
    "connects": "connect(connect(",
    "password calls": "setPassword(",
    "qr fields": "WIFI:S:a;",
    "qr strings": "WIFI:T:WPA;S:x;P:a1!b;;",
    "mc aliases": "mc alias set a b c ",
    "mosquitto flags": "mosquitto_pub -p 1 ",
    # a table's password column (orcad/secret_tables.py)
    "csv headers": "password,x\nfoo\n",
    "markdown headers": "| a | password |\n",
    "markdown tables": "| a | password |\n|---|---|\n| b | Xk9!mm2q |\n",
    "csv rows": "a,b,password\n1,2,Xk9!mm2q\n",
    # a password changed from one value to another (orcad/secret_sentences.py)
    "changes from": "changed the password from ",
    "changes from to": "password changed from a1!b to c2@d ",
    # a list of pairs under a credential word, each after its service (secret_colon_pairs.py)
    "listed service pairs": "creds:\n- a: b:c1!d\n",
    "pairs given with": "log in to a b c d e f with g / ",
    "aws key ids": "AKIAABCDEFGHIJKLMNOP / ",
    # token formats found from a literal inside them or a `$` (orcad/secret_tokens.py, formats)
    "fcm keys": "AAAAZV1kLrh:APA91b" + "Ab1_" * 34 + " ",
    "fcm literals": "APA91bAPA91bAPA91b:",
    "braintree heads": "access_token$production$access_token$",
    # vendor heads found from a literal (secret_tokens.py) or a substring search (formats):
    # each repeated with no separator, or cut one character short of a match
    "vendor heads": "glagent-A3-4b1dZ1//0EAABsha256~pat-na1-cioAb1IQoJb3JpZ2luX2Vj_mmk",
    "routable tails": "glpat-" + "Ab1_" * 8 + ".01.",
    "openshift heads": "sha256~" + "Ab1_" * 11 + "sha256~",
    "salesforce heads": "00DAb1Cd2Ef3Gh4Ij!AQ" + "Ab1." * 12 + "!AQ!AQ ",
    "sentry dsns": "https://" + "ab12" * 8 + "@o1.ingest." + "a-" * 20 + "://",
    "teams hooks": "IncomingWebhook/" + "ab12" * 8 + "/",
    "pat names": "GITHUB_PAT=ab12_pat=pat=path=compat pattern ",
    "encoded jwt heads": "ZXlK" + "Ab1+" * 20 + " ZXlKZXlK",
    "vendor keys": "Mistral key: UpZuDDHo3WorUqLxHEzX9guCpbRPrpxB Cohere key Qm7Rt2 ",
    "capitalised keys": "Ab key Cd key: ",
    # a user and a password of every character class (orcad/secret_strong_pairs.py)
    "strong pairs": "root/Toor!Lab99 admin:pfS3nse!Fw a | P0rt!Ui2 ",
    "joins before symbols": "a/b!c1Dx:e|F!g2h/",
    "joins in long runs": "a" * 200 + "/Ab1!" + "b" * 200 + ":",
    "emails with": "pg@corp.io with Pg4dm1n!Web with a@b.co with ",
    "accounts before bangs": "admin/Winter2024! admin/Abcdefgh1!x root:Ab1! ",
    "addresses with bangs": "root@10.0.0.5 with Winter2024! a@b.c with Ab1cdefgh! ",
    "values given with verbs": "use Hunter2!xyz for try A1!b use use try Ab1!" + "c" * 60 + " ",
    # short names, asides and logins before a value (secret_sentences.py, secret_logins.py)
    "short names": "pw Ssh!Comma9 pwd 'R3p#M0' pw pw pwd ",
    "names set apart": "the password, tigerLily#22, password, password, ",
    "asides after names": "password (case sensitive!): AbCd12$ password (",
    "pass phrases": "the pass phrase is 'blue whale jumps over 7 fences' pass phrase ",
    "hyphen-joined passphrases": "the password is blue-sky-42 password is a-b-c-d-e-f-g-1 ",
    "access codes": "garage keypad code 6093 door code for the a b c d 1-2-3-4-5-6 ",
    "code words": "code code combination door code ",
    # one long line of codes each before a condition: each looked for an example's word to the
    # line's end (6.5 s at 120 KiB, 105 s at 480 KiB) before the look was bounded
    "codes before conditions": "front door code 1234 if ",
    "codes for accounts": "backup codes for the a b c d e f: 4829 1736, backup codes for ",
    "recovery phrases": "seed phrase: " + "abandon " * 30 + "recovery phrase is ",
    "phrase words": "seed phrase recovery phrase wallet phrase ",
    "unseal keys": "unseal keys are:\n" + "T7hReFVeYa/vEyLyN3FaZx6xtq5E7YGWKSq3ylVPfQMH\n" * 12,
    "unseal words": "unseal key 1: unseal keys: unseal key ",
    "network lines": "WLAN: HomeNet_5G / key: Bananenbrot77\nwifi: a / key: ",
    "french verbs": "le mot de passe c'est Baguette2024 mot de passe c'est ",
    "logins with": "try logging in with tr0mb0ne-Velvet-31 log in with with ",
    "creds stated": "creds are admin Hunter2!xyz login is a b creds is ",
    # credentials mentioned in passing: plain words, a login's pass, slash pairs, a user then
    # a password after "with", short keys, pins where set, joined passphrases
    "plain words stated": "the password is bananabread, the password is fine ",
    "login passes": "the ftp pass is summer, the admin pass is rex2019 pass is ",
    "given pairs": "creds are admin / qwerty123 takes root / r00tme is a / b is a/ ",
    "users with": "log into the box with admin Penguin_77 log in with admin with a ",
    "short keys": "auth token W4tcNb8Yk1Hd the token is Hk2vL9xQ7mRz token key ",
    "pins where set": "the pin on the new routers is 123456 lol the pin on the ",
    "joined passphrases": "the passphrase is otter-kayak-moss passphrase is a-b-c ",
    # credentials said in more ways: a bot URL, "as a" and "that's the" names, misspelt
    # names, a pass where it is, pins with letters, lock codes, seed words, logins' places
    "bot urls": "/bot1234567890:AA" + "x" * 33 + "/bot123:AA /bot",
    "values before a names": "use Welcome1 as a temp password, Xk9!mq - that's the pw as a ",
    "misspelt names": "the pasword is letmein2024 passwrod for a b c is pasword: passowrd ",
    "passes where": "the root pass on the game server is Tq9-wolf-Lantern root pass on a ",
    "pins with letters": "the tablet pin is jellybean77 if the bitlocker pin on a b is pin is ",
    "lock codes": "the smart lock master code is 950317 lock code is master code ",
    "seed words": "wallet seed is " + "abandon " * 12 + ", seed words: seed is mnemonic ",
    "login places": "log into the old jenkins with Kn1ght!Rider log into the a b with ",
    "pairs after places": "login on the lab pc: student / tuna4ever login neo4j / a / ",
    "accounts with users": "the dev account on the lims is lab2 with Sequoia#Rings admin is a and ",
    "labels after pw": "nexus admin pw Nexus_Admin_9, admin pw a_B_1 admin pass ",
    "secrets with a word": "the shared secret is Zq8vR2mX_radius, secret is a_b_c-d ",
    "keychain flags": "security unlock-keychain -p Kc-8 security add-generic-password ",
    "codes after asides": "backup code in case: 4X7K-9QPM-2RTB backup codes, just in case: ",
    "labels before and": "the password is Blue-Sky-9 and the user is bob password is a-B-1 and ",
    "quoted words going on": 'passphrase is "autumn leaves fall" with the passphrase is "a b',
    "pins before asides": "the sim PIN is 48213957 actually my PIN is 1234 wait PIN is ",
}


def repeated(unit: str, size: int) -> str:
    """`unit` repeated to `size` bytes of UTF-8 (cut at a character)."""
    text = unit * (size // len(unit.encode("utf-8")) + 1)
    return text.encode("utf-8")[:size].decode("utf-8", "ignore")


def seconds(function: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


def scaling(
    detectors: list[Callable[[str], object]], unit: str, size: int, repeats: int
) -> list[tuple[float, float]]:
    """For each detector, the median seconds at `size` and at twice it, the detectors timed
    alternately; a run over 10 s is not repeated."""
    timings: list[list[list[float]]] = [[[], []] for _ in detectors]
    for column, text in enumerate((repeated(unit, size), repeated(unit, 2 * size))):
        for _ in range(repeats):
            for row, detector in enumerate(detectors):
                timings[row][column].append(seconds(detector, text))
            if max(times[column][-1] for times in timings) > 10:
                break
    return [(statistics.median(once), statistics.median(twice)) for once, twice in timings]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=256, help="KiB; also timed at twice it")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", metavar="REV", help="also time the detector of git REV")
    parser.add_argument("--only", nargs="*", choices=ADVERSARIAL, help="these inputs alone")
    arguments = parser.parse_args()
    size = arguments.size * KIB
    names = arguments.only or list(ADVERSARIAL)
    detectors: list[Callable[[str], object]] = [redact]
    labels = ["now"]
    if arguments.against:
        detectors.insert(0, load_detector(arguments.against).redact)
        labels.insert(0, arguments.against)
    print(f"redact at {arguments.size} KiB and twice it; medians of {arguments.repeats} runs")
    header = "".join(f" {f'{label} MB/s':>12} {f'{label} 2x/1x':>12}" for label in labels)
    print(f"{'input':20}{header}")
    for name in names:
        row = scaling(detectors, ADVERSARIAL[name], size, arguments.repeats)
        cells = "".join(
            f" {2 * size / MEGABYTE / twice:12.2f} {twice / once:12.2f}" for once, twice in row
        )
        print(f"{name:20}{cells}", flush=True)


if __name__ == "__main__":
    main()
