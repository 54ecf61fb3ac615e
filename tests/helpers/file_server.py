"""A real HTTP file server on loopback that honours Range requests, as a data mirror or a dataset's host would.

It serves a folder, logs each request (path, Range header, status, bytes sent) and can cut a transfer after a
number of bytes, closing the connection mid-body as a dropped network would, so an interrupted download is a
real one, or stall after a number of bytes, sending nothing more while the connection stays open, as a hung
server does. A missing file is answered 404.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class Served:
    path: str
    range: str | None
    status: int
    sent: int


@dataclass
class FileServer:
    root: Path
    cut_after: int | None = None  # bytes of the next body before the connection is dropped (once)
    ignore_range: bool = False  # answer a Range request with the whole file (200), as some servers do
    stall_after: int | None = None  # bytes of the next body before the server stops sending, connection open (once)
    log: list[Served] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event, repr=False)

    def __enter__(self) -> FileServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                relative = unquote(urlsplit(self.path).path).lstrip("/")
                file = (server.root / relative).resolve()
                if server.root.resolve() not in file.parents or not file.is_file():
                    # Logged before the reply goes out: the client may check the log as soon as it has the reply.
                    server.log.append(Served(relative, self.headers.get("Range"), 404, 0))
                    self.send_error(404)
                    return
                data = file.read_bytes()
                start, status = 0, 200
                match = None if server.ignore_range else _RANGE.match(self.headers.get("Range") or "")
                if match:
                    start = int(match.group(1))
                    if start >= len(data):
                        server.log.append(Served(relative, self.headers.get("Range"), 416, 0))
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                body = data[start:]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if server.cut_after is not None:  # the connection drops after these bytes
                    body, server.cut_after = body[: server.cut_after], None
                    self.close_connection = True
                stall = server.stall_after is not None
                if stall:
                    body, server.stall_after = body[: server.stall_after], None
                    self.close_connection = True
                server.log.append(Served(relative, self.headers.get("Range"), status, len(body)))
                self.wfile.write(body)
                self.wfile.flush()
                if stall:  # hold the connection open without a byte more, until the server stops
                    server._stopped.wait(timeout=60)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self._stopped.set()  # releases a stalled reply
        self.httpd.shutdown()
        self.httpd.server_close()
