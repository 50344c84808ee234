"""Passwords stated after the word for password in another language.

Pure module: no I/O. Finds "Passwort: Geheim2024", "la contraseña es Secreto123", "пароль:
qwerty123", and a lone word after a colon ("Kennwort: geheim") or, in German, Dutch, French,
Spanish, Portuguese and Italian, after the verb ("Das Passwort ist Sonnenblume", "le mot de
passe wifi c'est Baguette2024"). Leaves alone
the words of those languages that describe a password rather than give one ("Passwort:
erforderlich", "mot de passe : oublié"), and after the verb a word that is or ends like one of
that language's adjectives and participles (`secret_languages`: "Das Passwort ist abgelaufen").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_languages import OWNER_WORDS as FOREIGN_OWNER_WORDS
from orcad.secret_languages import VERB_LANGUAGES, Language, describes_password
from orcad.secret_sentences import (
    DESCRIBING_ENDS,
    DESCRIPTIVE,
    STATED_VALUE,
    stated_password,
)
from orcad.secret_spaced import HASH_SCHEMES
from orcad.secret_values import Span, end_before_trailing, is_placeholder, value_ends_clause

# the English word in Italian, Spanish, French, German or Portuguese, before the verb it takes
# there ("la password è X", "el password es X", "das Password ist X"); looked for alone first,
# one search whose literal start the engine skips to, before the rule's scan of the text
_BORROWED_VERB = r"(?:[ \t]+[^\s.,;:!?=]{1,30}+){0,4}?[ \t]+(?:è|es|est|ist|é)[ \t:]"
_BORROWED_WORD = lazy_compile(rf"password(?={_BORROWED_VERB})")

# The word for password in other languages, and their verb "is": German (Passwort, Kennwort;
# compounds such as Datenbankpasswort end in them), Spanish, French, Portuguese, Italian
# (password), Dutch, Polish (also "hasło to X"), Swedish (also lösenordet, the password),
# Danish/Norwegian, Finnish, Turkish (şifrem, şifresi: my, its password), Russian/Ukrainian,
# Czech/Slovak, Hungarian, Croatian/Serbian, Slovenian, Indonesian/Malay (kata sandi, kata
# sandinya: its password), Vietnamese, Greek, Chinese, Japanese, Korean, Hindi, Arabic (كلمة
# المرور, كلمة السر, "هي" its verb) and Hebrew (סיסמה or סיסמא, the article ה before it, "היא" its
# verb); French "mdp" is short for mot de passe.
_FOREIGN_PASSWORD = lazy_compile(
    r"(?:passwort|kennwort|(?<![^\W\d_])(?:contrase[ñn]a|mot de passe|mdp|senha|wachtwoord|"
    r"has[łl]o|l[öo]senord(?:et)?|adgangskode|passord|salasana|[şs]ifre(?:m|si|niz)?|пароль|"
    r"heslo|jelsz[óo]|lozinka|geslo|kata sandi(?:nya)?|mật khẩu|κωδικός(?: πρόσβασης)?|密码|"
    r"密碼|パスワード|비밀번호|पासवर्ड|(?:ال)?كلم[ةه] (?:ال)?(?:مرور|سر)|ה?סיסמ[האת]|"
    rf"password(?={_BORROWED_VERB})))"
    r"(?![^\W\d_])(?:(?P<words>(?:[ \t]+[^\s.,;:!?=\uff1a]{1,30}+){0,6}?)"
    r"(?:(?P<op>[ \t]*[:=\uff1a])[ \t]*|"
    r"[ \t]+(?P<verb>ist|lautet|war|es|era|est|c['\u2019]est|était|é|è|is|was|jest|to|är|er|on|"
    r"je|adalah|ialah|là|είναι|это|है|هي|هو|היא|הוא|—|-)[ \t]+)"
    + STATED_VALUE.replace(r"[ \t]+", "", 1)
    # or after a space alone ("Passwort Geheim2024!"), tried last, in the same scan; looked
    # ahead at, so that a word for password the value holds is still read
    + "|(?="
    + STATED_VALUE.replace("(?P<value>", "(?P<spaced>")
    + "))"
)


# the words' telling parts: ASCII ones alone are looked for in ASCII text (the Polish, Swedish
# and Turkish words are written with their diacritics; "eslo" is Czech heslo's and Slovenian
# geslo's)
_FOREIGN_ASCII_TRIGGERS = (
    "wort", "contrasena", "mot de passe", "mdp", "senha", "wachtwoord", "adgangskode", "passord",
    "salasana", "eslo", "lozinka", "kata sandi", "sifre",
)  # fmt: skip
_FOREIGN_TRIGGERS = (
    *_FOREIGN_ASCII_TRIGGERS, "contraseña", "hasło", "lösenord", "şifre", "пароль", "jelszó",
    "mật khẩu", "κωδικός", "密码", "密碼", "パスワード", "비밀번호", "पासवर्ड", "كلمة", "كلمه",
    "סיסמ",
)  # fmt: skip


# The words for password of the languages whose describing words are not listed below: after
# them only a value that looks chosen is one ("heslo: Praha2024!", not "heslo: povinné")
_CHOSEN_VALUES_ONLY = (
    "heslo", "jelsz", "lozinka", "geslo", "kata sandi", "mật khẩu", "κωδικός", "पासवर्ड", "ال",
    "كلم", "ה", "סיסמ",
)  # fmt: skip


# Words of those languages that describe a password rather than give one ("Passwort:
# erforderlich", "mot de passe : oublié", "contraseña: incorrecta"), and the words themselves.
_FOREIGN_DESCRIPTIVE = frozenset(
    (
        # German
        "erforderlich", "benötigt", "notwendig", "pflicht", "pflichtfeld", "optional", "leer",
        "falsch", "richtig", "korrekt", "ungültig", "gültig", "vergessen", "geändert",
        "abgelaufen", "gesperrt", "unbekannt", "kein", "keins", "keines", "keine", "nein",
        "siehe", "gespeichert", "verschlüsselt", "gehasht", "versteckt", "verborgen",
        "deaktiviert", "aktiviert", "unverändert", "zurückgesetzt", "sicher", "unsicher",
        "schwach", "stark", "lang", "kurz", "zufällig", "temporär", "fehlt", "falsches",
        # French
        "requis", "obligatoire", "facultatif", "optionnel", "vide", "incorrect", "incorrecte",
        "invalide", "valide", "oublié", "expiré", "inconnu", "aucun", "aucune", "modifié",
        "chiffré", "masqué", "caché", "défini", "sécurisé", "faible", "fort", "temporaire",
        "aléatoire",
        # Spanish and Portuguese
        "requerida", "requerido", "obligatoria", "obligatorio", "opcional", "vacía", "vacío",
        "incorrecta", "incorrecto", "inválida", "válida", "correcta", "olvidada", "caducada",
        "expirada", "desconocida", "ninguna", "ninguno", "cifrada", "oculta", "segura", "débil",
        "fuerte", "temporal", "aleatoria", "obrigatória", "obrigatório", "vazia", "incorreta",
        "correta", "esquecida", "desconhecida", "nenhuma", "criptografada", "fraca", "forte",
        "temporária", "aleatória",
        # Dutch, Polish, Swedish, Danish, Norwegian, Finnish, Turkish, Russian
        "verplicht", "optioneel", "leeg", "onjuist", "ongeldig", "geldig", "juist", "vergeten",
        "verlopen", "onbekend", "geen", "versleuteld", "veilig", "zwak", "sterk", "tijdelijk",
        "willekeurig", "wymagane", "wymagany", "opcjonalne", "puste", "nieprawidłowe",
        "błędne", "zapomniane", "wygasło", "brak", "zobacz", "nieznane", "obligatoriskt",
        "valfritt", "tomt", "felaktigt", "ogiltigt", "glömt", "utgånget", "okänt", "inget",
        "påkrevd", "påkrævet", "valgfri", "valgfritt", "forkert", "ugyldig", "glemt",
        "udløbet", "utløpt", "ukendt", "ukjent", "ingen", "pakollinen", "valinnainen", "tyhjä",
        "väärä", "virheellinen", "unohtunut", "vanhentunut", "tuntematon", "gerekli", "zorunlu",
        "boş", "yanl\u0131\u015f", "hatal\u0131", "geçersiz", "unutuldu", "bilinmiyor", "неверный",
        "неправильный", "обязательно", "обязательный", "требуется", "пустой", "пусто",
        "необязательно", "забыт", "забыли", "истёк", "истек", "неизвестен", "скрыт",
        "зашифрован",
        # the word for password itself
        "passwort", "kennwort", "contraseña", "contrasena", "senha", "wachtwoord", "hasło",
        "lösenord", "adgangskode", "passord", "salasana", "şifre", "пароль",
    )
)  # fmt: skip


def _foreign_word_given(value: str, *, clause_ends: bool) -> bool:
    """A lone word after the word for password and a colon ("Kennwort: geheim", "contraseña:
    gatito"): one in one case (not a type), that ends its clause and describes nothing."""
    lowered = value.lower()
    return (
        clause_ends
        and len(value) >= 4
        and value.isalpha()
        and (value.islower() or value.istitle())  # a script without case gives no sign
        and lowered not in _FOREIGN_DESCRIPTIVE
        and lowered not in DESCRIPTIVE
        and not is_placeholder(value)
    )


def _foreign_word_stated(value: str, words: str, language: Language, *, clause_ends: bool) -> bool:
    """A lone word after the word for password and the verb ("Das Passwort ist Sonnenblume",
    "la contraseña es girasol"): one that a colon would give, with no words but an owner's
    before the verb, that none of that language's describing words is or ends like ("ist
    abgelaufen", "est incorrect", "es obligatoria")."""
    between = words.split()
    return (
        (not between or between[0] in FOREIGN_OWNER_WORDS)
        and _foreign_word_given(value, clause_ends=clause_ends)
        and not describes_password(value, language)
    )


# Chinese, Japanese and Korean join the word for password to what follows with no space: a
# verb or topic marker ("密码是 X", "密码为 X", "パスワードは X", "비밀번호는 X"), and the word
# ends a compound ("数据库密码是 X", the database's). The password, in ASCII, ends where the
# script does; that a script has no case or spaces leaves only its clause's end to tell a
# password from a word of the sentence ("密码是 base64 编码的": the password is base64-encoded).
_CJK_PASSWORD = lazy_compile(
    r"(?:密码|密碼|パスワード|비밀번호)"
    r"(?:[ \t]*(?:(?:是|为|為|は|는)[ \t]*[:\uff1a]?|[:=\uff1a])|[ \t]+)"
    r"[ \t]*[\"'`\u201c\u300c]?(?P<value>[^\x00-\x20\x7f-\U0010ffff\"'`()\[\]{}<>]{4,128}+)"
)
_CJK_WORDS = ("密码", "密碼", "パスワード", "비밀번호")
# a copula may close the sentence after the value ("パスワードは X です", "비밀번호는 X입니다")
_CJK_CLAUSE_END = lazy_compile(
    r"[ \t]*(?:です|でした|だ|입니다|이에요|예요)?[ \t]*"
    r"(?:\Z|[\r\n.,;:!?)\"'\u3001\u3002\u300d\u201d\uff01\uff09\uff0c\uff1b\uff1f])"
)


# The sentence may go on after the password, past a space: then the password must be plainly
# chosen, and what follows start another clause (请, 别, 用户名: "我的密码是 Hunter2! 别告诉别人")
# or, with a symbol or all of upper case, lower case and digits, not describe the value
# ("密码是 Base64 编码的", "密码是 PBKDF2 哈希过的").
_CJK_GOES_ON = lazy_compile(r"[ \t]+(?=[^\x00-\x7f])")
_CJK_NEXT_CLAUSE = (
    "请", "請", "别", "別", "不要", "记得", "記得", "千万", "注意", "保管", "谢谢", "謝謝", "然后",
    "然後", "下次", "用户", "用戶", "账号", "帳號", "账户", "登录", "登入", "ユーザ", "忘れ",
    "아이디", "사용자",
)  # fmt: skip
_CJK_DESCRIBING = (
    "编码", "編碼", "加密", "哈希", "散列", "格式", "位", "个字符", "個字符", "字符", "年", "月",
    "算法", "存储", "存儲", "保存", "加盐", "形式", "暗号化", "ハッシュ", "文字", "桁", "자",
    "형식", "암호화", "해시",
)  # fmt: skip
_CHOSEN_CLASSES = lazy_compile(r"[^A-Za-z0-9]|(?=.*[a-z])(?=.*[A-Z]).*[0-9]")


def _cjk_sentence_goes_on(text: str, value: str, end: int) -> bool:
    """The sentence goes on after a password: another clause starts, or a plainly chosen
    password is followed by anything but words that describe it."""
    goes_on = _CJK_GOES_ON.match(text, end)
    if goes_on is None or not stated_password(value):
        return False
    following = text[goes_on.end() : goes_on.end() + 4]
    if following.startswith(_CJK_NEXT_CLAUSE):
        return True
    return _CHOSEN_CLASSES.search(value) is not None and not following.startswith(_CJK_DESCRIBING)


def _find_cjk_statements(text: str) -> Iterator[Span]:
    """A chosen password, or four digits or more, that ends its clause: "我的密码是 Hunter2!",
    "数据库密码是 s3cr3t", "パスワードは Tr0ub4dor です", "密码 Hunter2!"; or a chosen one the
    sentence goes on after ("密码是 s3cr3t 请保管好")."""
    for match in _cjk_matches(text):
        start, value_end = match.span("value")
        end = end_before_trailing(text, start, value_end)
        value = text[start:end]
        if (
            _CJK_CLAUSE_END.match(text, end) is not None
            and (stated_password(value) or (len(value) >= 4 and value.isdigit()))
        ) or _cjk_sentence_goes_on(text, value, value_end):
            yield start, end


def _cjk_matches(text: str) -> Iterator[re.Match[str]]:
    """The pattern matched from each of the words (looked for at memchr speed): opening with
    no one literal, searched, it would be tried at every character of a text not in ASCII."""
    for word in _CJK_WORDS:
        at = text.find(word)
        while at >= 0:
            match = _CJK_PASSWORD.match(text, at)
            if match is not None:
                yield match
            at = text.find(word, at + len(word))


# Spanish "clave" and German "Schlüssel" name a password as often as a key of a table or a
# lock ("la clave primaria es user_id", "der Schlüssel ist im Tresor"): a value counts only
# when it looks chosen, right after the word or after whose it is ("la clave del wifi es X",
# "WLAN-Schlüssel: X"), never after other words ("la clave primaria es Usuario2024").
_KEY_WORDS = ("clave", "schlüssel")
_FOREIGN_KEY = lazy_compile(
    r"(?:clave|schlüssel)(?![^\W\d_])(?P<words>(?:[ \t]+[^\s.,;:!?=]{1,30}+){0,5}?)"
    r"(?:[ \t]*:|[ \t]+(?:es|era|ist|lautet|war)(?:[ \t]*:)?)[ \t]+"
    r"[\"'`\u201c\u201e]?(?P<value>[^\s\"'`\u201c\u201d]{6,128}+)"
)
# whose the key is: "de", "des", "für" and the thing ("clave wifi"); "para" says what for as
# often ("la clave para entender esto es …")
_KEY_OWNERS = frozenset(
    ("de", "del", "für", "vom", "von", "des", "zum", "zur", "wifi", "wi-fi", "wlan", "acceso",
     "secreta", "router")
)  # fmt: skip


def _find_foreign_keys(text: str, lowered: str) -> Iterator[Span]:
    """A chosen password after "clave" or "Schlüssel": "la clave es Xk9#mm2pq", "Schlüssel:
    Sonnenblume2024"; "clave" as a word of its own, "Schlüssel" ending a compound too."""
    for word in _KEY_WORDS:
        at = lowered.find(word)
        while at >= 0:
            match = _FOREIGN_KEY.match(lowered, at)
            if match is not None and (word != "clave" or not lowered[at - 1 : at].isalpha()):
                words = match["words"].split()
                owned = not words or words[0] in _KEY_OWNERS
                start, value_end = match.span("value")
                end = end_before_trailing(text, start, value_end)
                if owned and stated_password(text[start:end]):
                    yield start, end
            at = lowered.find(word, at + len(word))


# A password the sentence goes on after ("Passwort Geheim2024! und Benutzer admin") must hold
# a symbol no name, version or encoding holds, with a letter and a digit ("Base64", "UTF-8",
# "SHA-256" and "v2.1" hold none), and be no path, address or host (no `/`, `:` or `.`:
# "git@github.com:org/repo2").
_CHOSEN_GOING_ON = lazy_compile(r"(?=[^/:.]*\Z)(?=.*?[!#$%&*@^~])(?=.*?\d)(?=.*?[^\W\d_])")


# Hindi puts the verb last, after the password: "मेरा पासवर्ड Hunter2024 है" (is, was)
_HINDI_COPULA = lazy_compile(r"[ \t]+(?:है|हैं|था|थी)[ \t]*(?:[\r\n.,;:!?।|]|\Z)")


def _spaced_password(text: str, value: str, value_end: int, end: int) -> bool:
    """A password after the word and a space alone, "Passwort Geheim2024!", "пароль
    qwerty123": one that looks chosen and is no hash or cipher's name ("Passwort Argon2id", as
    in English), and ends its clause (or Hindi's verb ends it after the password) unless it
    holds a symbol, a letter and a digit ("contraseña Xk9#mm2 para el servidor")."""
    quoted = text[value_end : value_end + 1] in ('"', "'", "`")
    return (
        (
            value_ends_clause(text, value_end + quoted, end + quoted)
            or _CHOSEN_GOING_ON.match(value) is not None
            or _HINDI_COPULA.match(text, value_end + quoted) is not None
        )
        and stated_password(value)
        and value.lower() not in HASH_SCHEMES
        and not _word_and_digits(value)
    )


def _word_and_digits(value: str) -> bool:
    """Letters of one case that end as a describing word does, then digits ("isolated1",
    "enabled2"): a test's or a setting's name rather than a chosen password ("qwerty123")."""
    letters = value.rstrip("0123456789")
    return (
        letters.isalpha()
        and (letters.islower() or letters.isupper())
        and letters.lower().endswith(DESCRIBING_ENDS)
    )


# Russian and Ukrainian state a password with no verb, after what it is for: "пароль от
# сервера X" (of the server), "пароль для входа X" (for logging in), "пароль від пошти X"; one
# to three words after the preposition, then a value with letters, a digit and a symbol
_OWNED_WITHOUT_VERB = lazy_compile(
    r"(?<![^\W\d_])пароль(?:[ \t]+(?:от|для|к|від|до))(?:[ \t]+[^\s.,;:!?=\"'`]{1,30}+){1,3}?"
    # the value's digit and symbol looked for here, so that a word of the owner is not taken
    r"[ \t]+[\"'`]?(?P<value>(?=\S*?\d)(?=\S*?[!#$%&*@^~])[^\s\"'`()\[\]{}<>]{4,128}+)"
)


def _owned_without_verb(text: str, lowered: str) -> Iterator[Span]:
    if "пароль" not in lowered:
        return
    for match in _OWNED_WITHOUT_VERB.finditer(lowered):
        start, value_end = match.span("value")
        end = end_before_trailing(text, start, value_end)
        value = text[start:end]
        if _CHOSEN_GOING_ON.match(value) is not None and stated_password(value):
            yield start, end


# French "mdp" is also the Markov decision process of machine learning, in capitals or in an
# English sentence ("MDP: gamma=0.99", "the mdp is FrozenLake-v1"): French's own verbs alone
_FRENCH_VERBS = frozenset(("est", "c'est", "c\u2019est", "était"))


# an environment's id in Gym and Gymnasium, `CartPole-v1`, `ALE/Pong-v5`: the process itself
_GYM_ID = lazy_compile(r"(?:[A-Za-z0-9_]+/)?[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-v[0-9]+")


def _french_mdp(text: str, match: re.Match[str]) -> bool:
    return text[match.start() : match.start() + 3] != "MDP" and (
        match["verb"] is None or match["verb"] in _FRENCH_VERBS
    )


# French "c'est X qui/que …" puts X forward, as English "it is X that …" does
_CLEFT = lazy_compile(r"[\"'`]?[ \t]+(?:qu(?:i|e)(?![a-z])|qu['\u2019])")


def find_foreign_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A password given after the word for password in another language: "Passwort:
    Geheim2024", "la contraseña es Secreto123", "пароль: qwerty123", "密码\uff1aabc12345",
    and a lone word after a colon, "Kennwort: geheim", or after the verb in German, Dutch,
    French, Spanish, Portuguese and Italian: "Das Passwort ist Sonnenblume"."""
    ascii_text = lowered.isascii()
    if not ascii_text:
        yield from _find_cjk_statements(text)
    yield from _find_foreign_keys(text, lowered)
    if not ascii_text:
        yield from _owned_without_verb(text, lowered)
    triggers = _FOREIGN_ASCII_TRIGGERS if ascii_text else _FOREIGN_TRIGGERS
    if not any(trigger in lowered for trigger in triggers) and (
        _BORROWED_WORD.search(lowered) is None
    ):
        return
    for match in _FOREIGN_PASSWORD.finditer(lowered):
        if lowered.startswith("mdp", match.start()) and not _french_mdp(text, match):
            continue
        spaced = match["spaced"] is not None
        start, value_end = match.span("spaced" if spaced else "value")
        end = end_before_trailing(text, start, value_end)
        value = text[start:end]
        if lowered.startswith("mdp", match.start()) and _GYM_ID.fullmatch(value):
            continue
        if spaced:
            if _spaced_password(text, value, value_end, end):
                yield start, end
            continue
        if (match["verb"] or "").startswith("c") and _CLEFT.match(lowered, value_end):
            continue  # "c'est Vault2024 qui le gère": it is Vault that keeps it, no password
        if stated_password(value):
            yield start, end
            continue
        if lowered.startswith(_CHOSEN_VALUES_ONLY, match.start()):
            continue
        clause_ends = value_ends_clause(text, value_end, end)
        words, verb = match["words"], match["verb"]
        if verb is None and match["op"] is not None:  # a verb and a colon: "Passwort lautet: X"
            *before, last = words.split() or [""]
            if last in VERB_LANGUAGES:
                words, verb = " ".join(before), last
        language = VERB_LANGUAGES.get(verb or "")
        # after a colon, few words describe the password ("Passwort: erforderlich"); after a
        # verb, any adjective or participle may ("Das Passwort ist abgelaufen")
        if (
            match["op"] is not None
            and not match["words"]
            and _foreign_word_given(value, clause_ends=clause_ends)
        ) or (
            language is not None
            and _foreign_word_stated(value, words, language, clause_ends=clause_ends)
        ):
            yield start, end
