"""A real webhook receiver on 127.0.0.1 for the alert tests (importable: tests/ is on
pythonpath)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """Records every POST; answers the status codes of ``answers`` in turn, then 200. With
    ``hold`` set, the first request is recorded and its answer held until ``hold`` is set
    (a sender killed meanwhile never learns it arrived)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.answers: list[int] = []
        self.hold: threading.Event | None = None
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
                length = int(self.headers["Content-Length"])
                hook.requests.append((self.headers["Idempotency-Key"],
                                      json.loads(self.rfile.read(length))))
                if hook.hold is not None and len(hook.requests) == 1:
                    hook.hold.wait(120)
                try:
                    self.send_response(hook.answers.pop(0) if hook.answers else 200)
                    self.end_headers()
                except OSError:  # the sender is gone (killed while the answer was held)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()
