"""Generate `protocol/schema.json`, the contract for clients in other languages.

Run `python -m protocol.schema` after changing protocol/types.py; a test fails while the
checked-in file is stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from protocol.errors import KIND_CODES
from protocol.types import METHODS, PROTOCOL_VERSION, ExtractedFact

SCHEMA_PATH = Path(__file__).with_name("schema.json")


def build_schema() -> dict[str, Any]:
    types: list[Any] = []
    for params, result in METHODS.values():
        types.extend((params, result))
    types.append(ExtractedFact)
    refs, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    refs_iter = iter(refs)
    methods = {name: {"params": next(refs_iter), "result": next(refs_iter)} for name in METHODS}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "orcad wire contract",
        "protocol": PROTOCOL_VERSION,
        "methods": methods,
        "extractor_output_line": next(refs_iter),
        "errors": {kind: int(code) for kind, code in KIND_CODES.items()},
        "$defs": components,
    }


def render_schema() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    SCHEMA_PATH.write_text(render_schema(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")


if __name__ == "__main__":
    main()
