"""A hand-written HTTP stand-in served on its own thread while a context is open."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer
from typing import TypeVar

S = TypeVar("S", bound=BaseServer)


@contextmanager
def serving(server: S) -> Iterator[S]:
    """`server`, answering on a daemon thread until the context ends (then shut and closed)."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
