"""The protocol package: schema freshness and independence from the daemon."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from protocol.schema import SCHEMA_PATH, render_schema
from protocol.types import METHODS, Params
from tests.harness import REPO_ROOT

pytestmark = pytest.mark.pure


def test_checked_in_schema_is_current() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema(), (
        "protocol/schema.json is stale: run `python -m protocol.schema`"
    )


def test_schema_names_every_method_and_error_kind() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert set(schema["methods"]) == set(METHODS)
    assert schema["errors"]["stale_session"] == -32010
    assert schema["errors"]["message_too_large"] == -32600


def test_protocol_imports_nothing_from_the_daemon_or_cli() -> None:
    code = (
        "import sys, protocol, protocol.client, protocol.trio_client, protocol.schema\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('orcad', 'orcactl')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_params_type_rejects_unknown_fields(method: str) -> None:
    params_type = METHODS[method][0]
    assert issubclass(params_type, Params)
    with pytest.raises(msgspec.ValidationError, match="unknown field `zz_unknown`"):
        msgspec.convert({"zz_unknown": 1}, params_type)
