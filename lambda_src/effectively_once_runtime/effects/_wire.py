"""One HTTP attempt under one deadline: connect, send and every read end by the same instant. Standard library only.

``http.client`` applies its ``timeout`` to each socket operation: a provider that answers one byte every 60 ms never
trips a 10 s read timeout, and the attempt runs as long as the answer trickles. Here the connection's socket is
wrapped so that each ``sendall`` and ``recv_into`` is given the time left until the attempt's end (at most the idle
``timeout``) and a call after the end raises ``TimeoutError`` at once. The TLS handshake runs on the raw socket,
each of its operations bounded by the time left when it starts. Name resolution (``getaddrinfo``) is the
resolver's own and is not bounded here.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
from collections.abc import Callable
from typing import Any


class AttemptClock:
    """The end of one attempt on ``clock`` (monotonic seconds), and the idle timeout of each socket operation."""

    def __init__(self, clock: Callable[[], float], seconds: float, idle: float) -> None:
        self._clock = clock
        self.seconds = seconds
        self._end = clock() + seconds
        self._idle = idle

    def left(self) -> float:
        """Seconds the next socket operation may take: the idle timeout cut to the time left.

        :raises TimeoutError: the attempt's end has passed.
        """
        left = self._end - self._clock()
        if left <= 0:
            raise TimeoutError(f"the attempt's deadline of {self.seconds:.1f} s passed")
        return min(self._idle, left)


class _TimedSocket:
    """A connected socket whose sends and receives share the attempt's deadline (``http.client`` calls only
    ``sendall``, ``makefile("rb")`` and ``close`` on its ``sock``; the rest is passed through). As ``socket.socket``
    does, the socket is closed when it and every file made from it are closed: ``HTTPConnection`` closes its socket
    as soon as the response says the connection will close, before the body is read."""

    def __init__(self, sock: socket.socket, deadline: AttemptClock) -> None:
        self._sock = sock
        self._deadline = deadline
        self._files = 0
        self._closed = False

    def sendall(self, data: Any) -> None:
        """Each ``send`` given the time left (``SSLSocket.sendall`` would give each of its sends the timeout set at
        its start)."""
        view = memoryview(data).cast("B")
        while view:
            self._sock.settimeout(self._deadline.left())
            view = view[self._sock.send(view) :]

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer, nbytes)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"a timed socket reads in mode 'rb' only, but {mode!r} was asked")
        self._files += 1
        return io.BufferedReader(socket.SocketIO(self, "rb"))  # type: ignore[arg-type]

    def _decref_socketios(self) -> None:
        """Called by ``SocketIO.close``."""
        self._files -= 1
        if self._closed and self._files <= 0:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if self._files <= 0:
            self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def connect_by(deadline: AttemptClock) -> Any:
    """``socket.create_connection`` whose every address gets the time left (the standard one gives each address of
    ``getaddrinfo`` the whole timeout: eight unreachable A records would take eight times the time left)."""

    def create_connection(address: tuple[str, int], timeout: Any = None, source_address: Any = None, *_: Any) -> Any:
        host, port = address
        last: OSError | None = None
        for family, kind, proto, _name, sockaddr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(deadline.left())
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                return sock
            except OSError as error:
                sock.close()
                last = error
                if isinstance(error, TimeoutError):
                    break
        raise last or OSError(f"getaddrinfo found no address for {host!r}")

    return create_connection


class TimedHTTPConnection(http.client.HTTPConnection):
    """An ``HTTPConnection`` whose connect, send and reads end by ``deadline``'s end.

    :raises TimeoutError: built after ``deadline``'s end (it reads the time left).
    """

    def __init__(self, host: str, port: int, deadline: AttemptClock) -> None:
        super().__init__(host, port, timeout=deadline.left())
        self._deadline = deadline
        self._create_connection = connect_by(deadline)

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()
        self.sock = _TimedSocket(self.sock, self._deadline)


class TimedHTTPSConnection(http.client.HTTPSConnection):
    """An ``HTTPSConnection`` (certificates verified with ``context``) whose connect, handshake, send and reads end by
    ``deadline``'s end.

    :raises TimeoutError: built after ``deadline``'s end (it reads the time left).
    """

    def __init__(self, host: str, port: int, deadline: AttemptClock, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=deadline.left(), context=context)
        self._deadline = deadline
        self._create_connection = connect_by(deadline)

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        http.client.HTTPConnection.connect(self)  # the TCP connection, on the raw socket
        self.sock.settimeout(self._deadline.left())
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)  # type: ignore[attr-defined]
        self.sock = _TimedSocket(self.sock, self._deadline)
