"""Forwards every request to Cairn's MCP endpoint with an API key added.

MCP's conformance suite connects to a bare URL and sends no credentials; an agent's
client is configured with a header instead (docs/mcp.md). This proxy plays that
configuration: `python auth_proxy.py PORT UPSTREAM KEY` serves http://127.0.0.1:PORT/mcp
and sends each request on to UPSTREAM (the API's /api/v1/mcp) with
`Authorization: Bearer KEY`, the rest of the request and the answer unchanged.
"""

import http.client
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection", "host"}


def proxy(port: int, upstream_url: str, key: str) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:`port` (0: any free port) forwarding to `upstream_url`."""
    upstream = urllib.parse.urlsplit(upstream_url)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Authorization"] = f"Bearer {key}"
            connection = http.client.HTTPConnection(
                upstream.hostname or "127.0.0.1", upstream.port, timeout=60
            )
            connection.request(self.command, upstream.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            connection.close()

        do_GET = do_POST = do_DELETE = forward

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"{self.command} {self.path} {format % args}\n")

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            # A client that hangs up mid-request (the suite does, between scenarios).
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)  # type: ignore[arg-type]

    return Server(("127.0.0.1", port), Forward)


def main() -> None:
    proxy(int(sys.argv[1]), sys.argv[2], sys.argv[3]).serve_forever()


if __name__ == "__main__":
    main()
