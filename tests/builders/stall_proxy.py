"""A TCP relay in front of an emulator that can stop answering: a network gone quiet.

While frozen it forwards nothing in either direction, and `held` is set as soon as the client
sends bytes meanwhile: a call is then in flight that will never get its answer. A test uses
it to press Ctrl-C while a command waits on a gRPC call for sure.
"""

from __future__ import annotations

import socket
import threading

from adapters.local.process_groups import HOST


class StallProxy:
    """`with StallProxy("127.0.0.1:PORT") as proxy:` then point the client at
    `proxy.address`; `proxy.freeze()` stops the traffic."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.frozen = threading.Event()
        self.held = threading.Event()  # the client sent bytes while frozen
        self._listener = socket.create_server((HOST, 0))
        self._sockets: list[socket.socket] = [self._listener]
        self._stopping = threading.Event()

    @property
    def address(self) -> str:
        return f"{HOST}:{self._listener.getsockname()[1]}"

    def __enter__(self) -> StallProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        for sock in self._sockets:
            sock.close()

    def freeze(self) -> None:
        self.frozen.set()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.frozen.is_set():
                if from_client:
                    self.held.set()
                self._stopping.wait()  # never delivered
                return
            try:
                dst.sendall(data)
            except OSError:
                return
