"""The orcad wire contract, protocol 1: types, errors, framing and clients.

This package imports nothing from `orcad` or `orcactl`.
"""

from protocol.client import Client, DaemonUnavailable
from protocol.errors import ErrorCode, ErrorObject, RemoteError
from protocol.types import METHODS, PROTOCOL_VERSION

__all__ = [
    "METHODS",
    "PROTOCOL_VERSION",
    "Client",
    "DaemonUnavailable",
    "ErrorCode",
    "ErrorObject",
    "RemoteError",
]
