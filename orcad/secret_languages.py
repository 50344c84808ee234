"""Whether a lone word after "the password is" in another language describes the password.

Pure module: no I/O. "Das Passwort ist Sonnenblume" gives a password; "Das Passwort ist
abgelaufen" says something about one. After the verb, unlike after a colon, the words that
describe are many: each language's adjectives and participles, known here by the word itself or
by how such words end. The secret detector (`secret_foreign_sentences.find_foreign_passwords`)
asks `describes_password` of the one word a sentence ends with after the verb.
"""

from __future__ import annotations

from typing import Literal

Language = Literal["de", "nl", "fr", "es", "pt", "it"]

# The verb "is" (and "was") of each language whose describing words are known here; the
# Portuguese and Italian "era" is read as Spanish.
VERB_LANGUAGES: dict[str, Language] = {
    "ist": "de",
    "war": "de",
    "lautet": "de",
    "is": "nl",
    "was": "nl",
    "est": "fr",
    "était": "fr",
    "es": "es",
    "era": "es",
    "é": "pt",
    "è": "it",
}

# The word for password names what it belongs to with these ("das Passwort für den Server ist
# ..."); other words between it and the verb make it a different subject.
OWNER_WORDS = frozenset(
    (
        "für", "vom", "von", "des", "zum", "zur", "pour", "du", "de", "para", "del", "do", "da",
        "dos", "das", "per", "della", "dello", "di", "voor", "van",
    )
)  # fmt: skip

# Adjectives, adverbs and nouns that end a sentence about a password ("ist zu kurz" ends with
# kurz) and that no ending below gives away. Endings that as many nouns and names have as
# adjectives (-al, -el, -ant and -ent in French, -ico, -ito and -ria in Spanish: cristal,
# caramel, croissant, gatito, Maria) are left out for the adjectives themselves.
_GERMAN = frozenset(
    (
        "geheim", "null", "nicht", "noch", "schon", "neu", "alt", "gleich", "dasselbe",
        "derselbe", "identisch", "aktiv", "inaktiv", "pflicht", "standard", "teil", "okay",
        "korrekt", "falsch", "richtig", "leer", "lang", "kurz", "sicher", "unsicher", "schwach",
        "stark", "gut", "schlecht", "anders", "hier", "dort", "weg", "egal", "bekannt",
        "unbekannt", "veraltet", "zurückgesetzt", "abgelaufen", "voll", "sinnlos",
    )
)  # fmt: skip
_DUTCH = frozenset(
    (
        "niet", "nog", "ook", "fout", "correct", "juist", "onjuist", "leeg", "kort", "lang",
        "nieuw", "oud", "hetzelfde", "anders", "zwak", "sterk", "geheim", "inactief", "actief",
        "goed", "slecht", "veilig", "onveilig", "hier", "daar", "weg", "oke", "oké", "bekend",
        "onbekend", "mislukt",
    )
)  # fmt: skip
_FRENCH = frozenset(
    (
        "trop", "très", "correct", "incorrect", "faux", "fausse", "bon", "bonne", "mauvais",
        "mauvaise", "nouveau", "nouvelle", "ancien", "ancienne", "vide", "secret", "secrète",
        "long", "longue", "court", "courte", "nul", "nulle", "public", "publique", "privé", "ici",
        "fort", "forte", "faible", "simple", "pareil", "même", "requis", "requise", "permis",
        "permise", "admis", "admise", "compris", "transmis", "soumis", "précis", "interdit",
        "interdite", "écrit", "inscrit", "détruit", "perdue", "connue", "inconnue", "attendue",
        "reçue", "prévue", "retenue", "personnel", "personnelle", "optionnel", "optionnelle",
        "actuel", "actuelle", "manuel", "confidentiel", "confidentielle", "réel", "essentiel",
        "normal", "normale", "légal", "illégal", "minimal", "minimale", "maximal", "global",
        "globale", "local", "locale", "principal", "différent", "différente", "suffisant",
        "suffisante", "insuffisant", "insuffisante", "manquant", "manquante", "existant",
        "inexistant", "valable", "obligatoire", "temporaire", "aléatoire", "provisoire",
        "nécessaire", "arbitraire", "active", "inactive", "facultative", "excessive",
        "définitive", "exclusive",
    )
)  # fmt: skip
_SPANISH = frozenset(
    (
        "demasiado", "muy", "nueva", "nuevo", "vieja", "viejo", "igual", "misma", "mismo",
        "corta", "corto", "larga", "largo", "secreta", "secreto", "nula", "nulo", "segura",
        "seguro", "débil", "fuerte", "única", "único", "privada", "pública", "público", "vacía",
        "vacío", "aquí", "distinta", "distinto", "errónea", "erróneo", "normal", "personal",
        "total", "legal", "ilegal", "general", "global", "local", "principal", "formal",
        "opcional", "idéntica", "idéntico", "automática", "automático", "genérica", "básica",
        "típica", "específica", "crítica", "necesaria", "necesario", "aleatoria", "aleatorio",
        "provisoria", "provisional", "arbitraria", "voluntaria", "obligatoria", "obligatorio",
        "invalida", "valida", "falsa", "falso", "buena", "mala", "ok",
    )
)  # fmt: skip
_PORTUGUESE = frozenset(
    (
        "nova", "novo", "velha", "velho", "igual", "mesma", "mesmo", "curta", "curto", "longa",
        "longo", "secreta", "secreto", "nula", "segura", "seguro", "fraca", "fraco", "forte",
        "única", "único", "privada", "pública", "vazia", "vazio", "aqui", "muito", "diferente",
        "incorreta", "incorreto", "correta", "correto", "errada", "normal", "pessoal", "total",
        "opcional", "local", "global", "idêntica", "automática", "necessária", "aleatória",
        "obrigatória", "obrigatório", "falsa", "boa", "má", "ok",
    )
)  # fmt: skip
_ITALIAN = frozenset(
    (
        "troppo", "molto", "corta", "corto", "lunga", "lungo", "nuova", "nuovo", "vecchia",
        "vecchio", "uguale", "stessa", "stesso", "segreta", "segreto", "sicura", "sicuro",
        "debole", "forte", "richiesta", "vuota", "vuoto", "nulla", "qui", "corretta", "giusta",
        "diversa", "diverso", "nascosta", "opzionale", "normale", "personale", "temporale",
        "locale", "globale", "principale", "generale", "speciale", "totale", "identica",
        "automatica", "unica", "pubblica", "privata", "necessaria", "casuale", "obbligatoria",
        "obbligatorio", "falsa", "buona", "ok", "valida", "valido", "invalida", "temporanea",
        "istantanea",
    )
)  # fmt: skip
_WORDS: dict[Language, frozenset[str]] = {
    "de": _GERMAN,
    "nl": _DUTCH,
    "fr": _FRENCH,
    "es": _SPANISH,
    "pt": _PORTUGUESE,
    "it": _ITALIAN,
}

# How participles, adjectives and adverbs end. Germanic participles are told by their prefix
# and ending instead (`_germanic_participle`).
_SPANISH_ENDS = (
    "ado", "ada", "ados", "adas", "ido", "ida", "idos", "idas", "ble", "bles", "nte", "ntes",
    "iva", "ivo", "mente",
)  # fmt: skip
_ITALIAN_ENDS = (
    "ato", "ata", "ati", "ate", "ito", "ita", "iti", "ite", "uto", "uta", "bile", "bili", "nte",
    "nti", "iva", "ivo", "mente", "oria", "orio",
)  # fmt: skip
_ENDS: dict[Language, tuple[str, ...]] = {
    "de": ("ig", "lich", "isch", "bar", "los", "sam", "haft", "iert", "iv", "ell", "end"),
    "nl": ("ig", "lijk", "baar", "isch", "loos", "ief", "eel", "end"),
    "fr": ("é", "ée", "és", "ées", "if", "ible", "able", "ique", "eux", "euse", "i", "ie", "u"),
    "es": _SPANISH_ENDS,
    "pt": ("ado", "ada", "ido", "ida", "vel", "veis", "nte", "iva", "ivo", "mente", "ória", "ório"),
    "it": _ITALIAN_ENDS,
}
_GERMANIC_PREFIXES: dict[Language, tuple[str, ...]] = {
    "de": ("ge", "be", "ver", "er", "ent", "zer", "über", "unter", "hinter", "miss", "wider"),
    "nl": ("ge", "be", "ver", "ont", "her", "er", "mis"),
}


def _germanic_participle(word: str, language: Language) -> bool:
    """A past participle: a prefix, or "ge" after a separable one (abgelaufen, opgeslagen),
    and the ending t, d or en (gesetzt, verlopen, gewijzigd)."""
    return word.endswith(("t", "d", "en")) and (
        word.startswith(_GERMANIC_PREFIXES[language]) or "ge" in word[2:8]
    )


def describes_password(word: str, language: Language) -> bool:
    """Whether `word`, the one word after the verb, says what the password is like rather than
    what it is. A German word in capitals is a noun: only the nouns known here describe."""
    lowered = word.lower()
    if lowered in _WORDS[language]:
        return True
    if language == "de" and word[:1].isupper():
        return False
    return lowered.endswith(_ENDS[language]) or (
        language in _GERMANIC_PREFIXES and _germanic_participle(lowered, language)
    )
