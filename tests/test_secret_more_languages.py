"""Passwords given in French shorthand (mdp), Hindi, Arabic, Hebrew, Turkish, Croatian and
Slovenian, and the sentences of those languages about passwords that must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("mdp: Soleil2024", "Soleil2024"),
        ("mdp : Soleil2024!", "Soleil2024!"),
        ("mdp Soleil2024!", "Soleil2024!"),
        ("mon mdp est Soleil2024", "Soleil2024"),
        ("le mdp du serveur est Xk9#mPq2", "Xk9#mPq2"),
        ("mdp: tournesol", "tournesol"),
        ("le mdp wifi c'est Baguette2024", "Baguette2024"),
        ("मेरा पासवर्ड Xk9#mPq2 है", "Xk9#mPq2"),
        ("मेरा पासवर्ड Hunter2024 है", "Hunter2024"),
        ("डेटाबेस का पासवर्ड Xk9#mPq2 है।", "Xk9#mPq2"),
        ("पासवर्ड: Xk9#mPq2", "Xk9#mPq2"),
        ("पासवर्ड है Xk9#mPq2", "Xk9#mPq2"),
        ("كلمة المرور هي Xk9#mPq2", "Xk9#mPq2"),
        ("كلمة المرور: Xk9#mPq2", "Xk9#mPq2"),
        ("كلمة السر هي Xk9#mPq2", "Xk9#mPq2"),
        ("كلمة السر: Xk9#mPq2", "Xk9#mPq2"),
        ("كلمة المرور الخاصة بي هي Hunter2024", "Hunter2024"),
        ("הסיסמה היא Xk9#mPq2", "Xk9#mPq2"),
        ("סיסמה: Xk9#mPq2", "Xk9#mPq2"),
        ("הסיסמא היא Xk9#mPq2", "Xk9#mPq2"),
        ("הסיסמה שלי היא Hunter2024", "Hunter2024"),
        ("סיסמת המנהל היא Adm1n!2024", "Adm1n!2024"),
        ("şifrem Xk9#mPq2", "Xk9#mPq2"),
        ("wifi şifresi: Sicak2024!", "Sicak2024!"),
        ("lozinka: Tajna2024", "Tajna2024"),
        ("lozinka je Tajna2024!", "Tajna2024!"),
        ("geslo: Skrivno.2024", "Skrivno.2024"),
        ("geslo je Ljubljana2024!", "Ljubljana2024!"),
    ],
)
def test_a_password_given_in_another_language_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert secret_kinds(text) == "password_statement"
    assert redacted == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "mdp oublié",
        "mdp: oublié",
        "le mdp est incorrect",
        "réinitialiser le mdp",
        "cmdp: Soleil2024",
        "the mdp is FrozenLake-v1",
        "our mdp is CartPole-v1",
        "MDP: gamma=0.99",
        "MDP: Soleil2024",
        "mdp_env: CliffWalking-v0",
        "mdp: CliffWalking-v0",
        "mdp = CartPole-v1",
        "  mdp: ALE/Pong-v5",
        "mdp est LunarLander-v2",
        "पासवर्ड रीसेट करें",
        "पासवर्ड: आवश्यक",
        "पासवर्ड भूल गए?",
        "कृपया अपना पासवर्ड बदलें",
        "كلمة المرور مطلوبة",
        "كلمة المرور: مطلوبة",
        "نسيت كلمة المرور؟",
        "كلمة المرور: sunshine",
        "كلمة المرور قصيرة جدا",
        "שכחתי את הסיסמה",
        "הסיסמה חייבת להכיל 8 תווים",
        "סיסמה: חובה",
        "סיסמה: sunshine",
        "şifreniz en az 8 karakter olmal\u0131",
        "lozinka: obavezna",
    ],
)
def test_sentences_about_a_password_in_those_languages_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
