"""A TCP relay of the local stack: clients connect to `address`, each connection is forwarded
to `target` by two threads, and a subclass sees every piece the client sends (the Bigtable
meter counts requests in it; a test's stall proxy stops forwarding).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from adapters.local.process_groups import HOST


class TcpRelay:
    """`relay.start()`, point clients at `relay.address`, `relay.stop()`. `forward` decides,
    piece by piece (with what `open_stream` made for that direction), whether the data goes
    on (False ends that direction). With `close_both_on_end` a closed side closes the other
    one too."""

    close_both_on_end = True

    def __init__(self, target: str, name: str = "tcp-relay") -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.name = name
        self._listener = socket.create_server((HOST, 0))
        self._sockets: list[socket.socket] = [self._listener]
        self._stopping = threading.Event()

    @property
    def address(self) -> str:
        return f"{HOST}:{self._listener.getsockname()[1]}"

    def start(self) -> TcpRelay:
        threading.Thread(target=self._accept, name=self.name, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for sock in list(self._sockets):
            try:
                sock.close()
            except OSError:
                pass

    def open_stream(self, from_client: bool) -> Any:
        """What `forward` keeps per direction of one connection (the base relay: nothing)."""
        return None

    def forward(self, data: bytes, from_client: bool, stream: Any) -> bool:
        """Whether `data` goes on to the other side (the base relay forwards everything);
        `stream` is what `open_stream` made for this direction of this connection."""
        return True

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            # gRPC writes small frames and waits for answers: without TCP_NODELAY, Nagle's
            # algorithm holds each one for the peer's delayed ACK (tens of ms a request).
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets = [s for s in self._sockets if s.fileno() != -1] + [client, server]
            for args in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        stream = self.open_stream(from_client)
        try:
            while True:
                data = src.recv(65536)
                if not data or not self.forward(data, from_client, stream):
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            if self.close_both_on_end:
                for sock in (src, dst):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
