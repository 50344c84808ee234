"""The floor for bench/rpc.py: a minimal trio NDJSON server that answers each line at once."""

from __future__ import annotations

import sys

import trio


async def serve_connection(stream: trio.SocketStream) -> None:
    buffer = b""
    async with stream:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            if lines:
                await stream.send_all(b"".join(line + b"\n" for line in lines))


async def main(path: str) -> None:
    listeners = (
        await trio.open_unix_listeners(path) if hasattr(trio, "open_unix_listeners") else None
    )
    if listeners is None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen(4096)
        listeners = [trio.SocketListener(sock)]
    await trio.serve_listeners(serve_connection, listeners)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
