"""Wi-Fi keys in wpa_supplicant.conf, a NetworkManager keyfile, hostapd.conf and nmcli: each
goes, and what looks like one but holds none stays storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure

HEX_KEY = "3f1b2c4d5e6f4a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('network={\n    ssid="HomeNet"\n    psk="Sunflower2024!"\n}', "Sunflower2024!"),
        ('network={\n\tssid="Cafe"\n\tpsk="purple monkey dishwasher"\n\tkey_mgmt=WPA-PSK\n}',
         "purple monkey dishwasher"),
        ('psk="correcthorsebattery"', "correcthorsebattery"),  # quoted: a passphrase as given
        ('psk="Sunfl0we"', "Sunfl0we"),  # 8 characters, the fewest WPA takes
        ('psk="' + "Sunfl0wer" * 7 + '"', "Sunfl0wer" * 7),  # 63, the most
        ("nmcli con modify lab wifi-sec.psk Sunfl0we", "Sunfl0we"),
        (f"network={{\n  ssid=\"lab\"\n  psk={HEX_KEY}\n}}", HEX_KEY),
        ("[wifi-security]\nkey-mgmt=wpa-psk\npsk=Sunflower2024!\n", "Sunflower2024!"),
        (f"interface=wlan0\nwpa=2\nwpa_psk={HEX_KEY}\n", HEX_KEY),
        ('    psk="Tr0ub4dor&3"   # the office network\n', "Tr0ub4dor&3"),
        ('psk="Sunflower2024!"\r\n', "Sunflower2024!"),
        ("nmcli con modify HomeNet wifi-sec.psk Sunflower2024!", "Sunflower2024!"),
        ("nmcli c add type wifi ssid lab wifi-sec.key-mgmt wpa-psk wifi-sec.psk 'Xk9#mm2pq'",
         "Xk9#mm2pq"),
        ('nmcli con mod lab 802-11-wireless-security.psk "purple monkey 42"', "purple monkey 42"),
        ("sudo nmcli connection modify iot wifi-sec.psk Pl4nt#Sensors && nmcli con up iot",
         "Pl4nt#Sensors"),
        # an unquoted value runs to the line's end: `#` is part of it there
        ("[wifi-security]\npsk=Summer24#Beach!\n", "Summer24#Beach!"),
        ("psk=Summer24 #Beach\n", "Summer24 #Beach"),
        ("wpa_psk=Summer24#Beach!", "Summer24#Beach!"),
        # nmcli names the key: any passphrase, and as `--show-secrets` prints it
        ("nmcli con modify Home wifi-sec.psk sunshinebeach", "sunshinebeach"),
        ("802-11-wireless-security.psk:          Sunshine2024\n", "Sunshine2024"),
        # a plain word beside the network's own settings: the keyfile's section or WPA-PSK
        ("[connection]\nid=Home\n[wifi-security]\nkey-mgmt=wpa-psk\npsk=sunshinebeach\n",
         "sunshinebeach"),
        ("[wifi-security]\npsk=abcdefghij\n", "abcdefghij"),
    ],
)  # fmt: skip
def test_a_wifi_key_is_redacted(text: str, key: str) -> None:
    assert redact(text) == text.replace(key, "[REDACTED:credential_assignment]")
    assert secret_kinds(text) == "credential_assignment"


@pytest.mark.parametrize(
    "text",
    [
        "key_mgmt=WPA-PSK",
        "nmcli con modify lab wifi-sec.key-mgmt wpa-psk",
        'psk="$WIFI_PSK"',
        "psk=${PSK}",
        'psk="<your passphrase>"',
        "psk=your_passphrase",
        'nmcli con modify lab wifi-sec.psk "$PSK"',
        "nmcli con modify lab wifi-sec.psk <password>",
        "the psk is stored in the vault",
        "set psk= in the file",
        'x psk="Sunflower2024!"',  # not a setting on its own line
        'psk="short"',  # under the 8 characters WPA requires
        "psk=abcdefghij",  # unquoted, a word: not chosen as a key
        "wpa_psk psk psk wifi-sec.psk",
        'psk="Sunfl0w"',  # 7 characters: WPA takes 8 to 63
        'psk="' + "Sunfl0wer" * 7 + 'x"',  # 64 quoted: over 63
        "nmcli con modify lab wifi-sec.psk Sunfl0w",
        "802-11-wireless-security.psk:          <hidden>",
        # code that names a variable psk
        "    psk=psk_bytes\n",
        "    psk=get_psk()\n",
        "psk=derive_psk(ssid,passphrase)",
        "psk=bytes.fromhex(key)",
        "psk=malloc(64);",
        "wpa_psk=hostapd_psk_file",
        "psk=@WIFI_PSK@",
        "psk=None",
        # beside a network's settings, code and placeholders are still no key
        "[wifi-security]\nkey-mgmt=wpa-psk\npsk=get_psk()\n",
        "[wifi-security]\nkey-mgmt=wpa-psk\npsk=your_passphrase\n",
        "[wifi-security]\nkey-mgmt=wpa-psk\npsk=${WIFI_PSK}\n",
        "key_mgmt = WPA-PSK\npsk=settings.wifi_psk\n",
        # wpa_supplicant.conf's spelling: there an unquoted psk is hex or nothing valid
        "network={\n  key_mgmt=WPA-PSK\n  psk=hash_of_key\n}",
    ],
)
def test_what_looks_like_a_wifi_key_but_is_none_stays_storable(text: str) -> None:
    assert find_secrets(text) == []
