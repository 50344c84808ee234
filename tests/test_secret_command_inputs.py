"""Passwords a command reads from its input or takes as a literal to protect, each with what
must go and what looks like it but must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


# ------------------------------------------------ piped into a command that reads its input
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("echo Xk9mm2pqLw | docker login --username admin --password-stdin", "Xk9mm2pqLw"),
        ("echo 'Xk9#mm2pq' | podman login -u a --password-stdin quay.io", "Xk9#mm2pq"),
        ("echo -n Hunter2pass | helm registry login reg.io -u me --password-stdin", "Hunter2pass"),
        ("printf '%s' 'Xk9mm2pqLw' | oras login -u me --password-stdin reg.io", "Xk9mm2pqLw"),
        ('printf "%s\\n" S3cr3t! | skopeo login --password-stdin -u me reg.io', "S3cr3t!"),
        ("$ echo hunter22 | docker login -u me --password-stdin\nLogin Succeeded", "hunter22"),
        ("run: echo Pa55word | buildah login -u ci --password-stdin reg.io", "Pa55word"),
        ("echo -e 'Tr0ub4dor&3' | docker login --password-stdin -u bob", "Tr0ub4dor&3"),
        ("echo Adm1n#2024 | docker --config /tmp/c login --password-stdin", "Adm1n#2024"),
        ('$pw = ConvertTo-SecureString "Xk9mm2pqLw" -AsPlainText -Force', "Xk9mm2pqLw"),
        ("ConvertTo-SecureString -String 'P@ssw0rd!' -AsPlainText -Force", "P@ssw0rd!"),
        ("echo Dock3r!Hub | docker login -u me --password-stdin docker.io", "Dock3r!Hub"),
        ('$sec = ConvertTo-SecureString -String "Adm1n#2024" -AsPlainText -Force', "Adm1n#2024"),
        ("convertto-securestring 'Xk9mm2pqLw' -asplaintext -force", "Xk9mm2pqLw"),
        (
            '$cred = New-Object PSCredential("svc", (ConvertTo-SecureString "Svc!2024x" '
            "-AsPlainText -Force))",
            "Svc!2024x",
        ),
        ('ConvertTo-SecureString "Tr0ub4dor&3" -AsPlainText -Force | Set-Secret', "Tr0ub4dor&3"),
        ("PS C:\\> ConvertTo-SecureString 'Winter2025!' -AsPlainText -Force", "Winter2025!"),
        ('$pw = ConvertTo-SecureString "hunter22" -Force -AsPlainText', "hunter22"),
        ('ConvertTo-SecureString -String "S3cr3t-Value" -AsPlainText', "S3cr3t-Value"),
        ("$p = ConvertTo-SecureString 'Pg$tag1ng' -AsPlainText -Force", "Pg$tag1ng"),
    ],
)
def test_a_password_piped_or_made_a_secure_string_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert secret_kinds(text) == "password_flag"  # named, never the value
    assert "[REDACTED:password_flag]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        'echo "$CR_PAT" | docker login ghcr.io -u USER --password-stdin',
        "cat pw.txt | docker login --password-stdin",
        "echo $(pass show reg) | docker login --password-stdin",
        "echo ${TOKEN} | docker login -u me --password-stdin",
        "echo hello | wc -l\ndocker login --password-stdin",  # not piped into it
        "aws ecr get-login-password | docker login --username AWS --password-stdin 1.dkr.ecr",
        "echo <password> | docker login --password-stdin",
        "use --password-stdin instead of -p",
        "ConvertTo-SecureString $env:PW -AsPlainText -Force",
        'ConvertTo-SecureString "$secret" -AsPlainText -Force',
        "Read-Host -AsSecureString | ConvertFrom-SecureString",
        "passwd --stdin reads the new password from standard input",
    ],
)
def test_input_that_names_where_the_password_is_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------- a secure string assigned to a variable keeps its cmdlet
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ('$pw = ConvertTo-SecureString "Xk9#mm2" -AsPlainText -Force', "Xk9#mm2"),
        ('$Password = ConvertTo-SecureString -String "Xk9#mm2" -AsPlainText -Force', "Xk9#mm2"),
        ('password = ConvertTo-SecureString "Tr0ub4dor&3" -AsPlainText -Force', "Tr0ub4dor&3"),
        ('$securePassword = ConvertTo-SecureString "S3cr3t!" -AsPlainText -Force', "S3cr3t!"),
        ("$secret = ConvertTo-SecureString 'Adm1n#2024' -AsPlainText -Force", "Adm1n#2024"),
        ('$pass = ConvertTo-SecureString -String "Pg$tag1ng" -AsPlainText', "Pg$tag1ng"),
        ('$DbPwd = ConvertTo-SecureString "Winter2025!" -Force -AsPlainText', "Winter2025!"),
        ('$cred_password = ConvertTo-SecureString "hunter22" -AsPlainText -Force', "hunter22"),
        ('PS C:\\> $pw = ConvertTo-SecureString "Xk9mm2pqLw" -AsPlainText -Force', "Xk9mm2pqLw"),
    ],
)
def test_only_the_password_of_an_assigned_secure_string_is_redacted(
    text: str, password: str
) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_flag]")


@pytest.mark.parametrize(
    "text",
    [
        "$pw = ConvertTo-SecureString $env:DB_PASSWORD -AsPlainText -Force",
        "$SecurePassword = ConvertTo-SecureString -String $PlainPassword -AsPlainText -Force",
        "$secret = ConvertFrom-SecureString $pw",
        "$password = ConvertTo-SecureString",
        "$pw = Get-Content pw.txt | ConvertTo-SecureString",
        '$password = Read-Host -Prompt "Password" -AsSecureString',
        "$DbPassword = Unprotect-CmsMessage -Path secret.cms",
        "$secret = Get-Secret -Name db -AsPlainText",
        "$token = Import-Clixml -Path token.xml",
        "password: ConvertFrom-SecureString, then Set-Content",
    ],
)
def test_a_cmdlet_assigned_to_a_password_variable_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("PASSWORD=Get-Started", "Get-Started"),
        ("DB_PASSWORD=Get-Lucky", "Get-Lucky"),
        ("$password = 'Select-Lantern'", "Select-Lantern"),
        ("password: Get-Lucky7", "Get-Lucky7"),
        ("the password is Read-Books42", "Read-Books42"),
        ("the admin password is Invoke-Magic!", "Invoke-Magic!"),
    ],
)
def test_a_password_of_two_words_joined_as_a_cmdlet_is_not_taken_for_one(
    text: str, password: str
) -> None:
    # a verb PowerShell uses and any capitalised word made a "cmdlet", so these were kept
    redacted = redact(text)
    assert password not in redacted and redacted.startswith(text.partition(password)[0])
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "$pw = Get-Random",
        "$cred = Get-Credential",
        "$key = Get-Clipboard",
        "$value = Get-AzKeyVaultSecret -VaultName ops -Name db",
        "$token = (Invoke-RestMethod -Uri $url).token",
        "$password = New-Guid",
    ],
)
def test_a_cmdlet_of_a_known_or_compound_noun_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------ a password piped into passwd
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("echo 'Xk9#mm2' | passwd --stdin bob", "Xk9#mm2"),
        ('echo "Tr0ub4dor&3" | sudo passwd --stdin deploy', "Tr0ub4dor&3"),
        ("echo -n hunter22 | passwd --stdin root\n", "hunter22"),
        ("printf '%s' 'S3cr3t!' | passwd --stdin alice", "S3cr3t!"),
        (
            "$ echo Welcome2024 | passwd --stdin jdoe\nChanging password for user jdoe.",
            "Welcome2024",
        ),
        ("ssh host \"echo 'Pg$tag1ng' | passwd --stdin app\"", "Pg$tag1ng"),
        ("useradd ci && echo Adm1n#2024 | passwd --stdin ci", "Adm1n#2024"),
        ("RUN echo 'Xk9mm2pqLw' | passwd --stdin builder", "Xk9mm2pqLw"),
        ("echo -e 'Winter2025!' | sudo passwd --stdin ops\r\n", "Winter2025!"),
    ],
)
def test_a_password_piped_into_passwd_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_flag]")


@pytest.mark.parametrize(
    "text",
    [
        "echo $NEWPW | passwd --stdin bob",
        'echo "${USER_PASSWORD}" | passwd --stdin "$USER_NAME"',
        "cat pw.txt | passwd --stdin bob",
        "echo done | wc -l; passwd --stdin bob",
        "passwd --stdin bob < pw.txt",
        "echo <password> | passwd --stdin bob",
        "echo hello\npasswd --stdin bob",
        "openssl rand -base64 12 | passwd --stdin bob",
        "echo 'Xk9#mm2' | chpasswd --stdin",
        "echo 'Xk9#mm2' | passwd --stdinx bob",
    ],
)
def test_input_to_passwd_that_is_no_password_stays_storable(text: str) -> None:
    assert find_secrets(text) == []
