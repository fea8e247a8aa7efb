"""A TCP relay in front of an emulator that can stop answering: a network gone quiet.

While frozen it forwards nothing in either direction, and `held` is set as soon as the client
sends bytes meanwhile: a call is then in flight that will never get its answer. A test uses
it to press Ctrl-C while a command waits on a gRPC call for sure.
"""

from __future__ import annotations

import threading
from typing import Any

from adapters.local.tcp_relay import TcpRelay


class StallProxy(TcpRelay):
    """`with StallProxy("127.0.0.1:PORT") as proxy:` then point the client at
    `proxy.address`; `proxy.freeze()` stops the traffic."""

    close_both_on_end = False  # a network gone quiet closes nothing

    def __init__(self, target: str) -> None:
        super().__init__(target, name="stall-proxy")
        self.frozen = threading.Event()
        self.held = threading.Event()  # the client sent bytes while frozen

    def __enter__(self) -> StallProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def freeze(self) -> None:
        self.frozen.set()

    def forward(self, data: bytes, from_client: bool, stream: Any) -> bool:
        if self.frozen.is_set():
            if from_client:
                self.held.set()
            self._stopping.wait()  # never delivered
            return False
        return True
