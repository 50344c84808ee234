import pytest

from tests.harness import DaemonProcess

pytestmark = pytest.mark.daemon


def test_ping_answers_with_protocol_version(daemon: DaemonProcess) -> None:
    result = daemon.call("daemon.ping")
    assert result.protocol == 1
    assert result.pid == daemon.proc.pid
