"""Starts localstripe (PyPI, a stateful fake of Stripe's API that signs and sends
webhooks) for the local stack and the tests: bound to 127.0.0.1 only (it binds every
interface by default) and with its state in a file of ours instead of
/tmp/localstripe.pickle.

Usage: python3 run_localstripe.py PORT STATE_FILE (named so as not to shadow the package)
"""

import builtins
import logging
import socket
import sys

from aiohttp import web

import localstripe.resources as resources
from localstripe import server

DEFAULT_STATE = "/tmp/localstripe.pickle"


def main() -> None:
    port, state = int(sys.argv[1]), sys.argv[2]

    def redirected_open(path, *args, **kwargs):
        return builtins.open(state if path == DEFAULT_STATE else path, *args, **kwargs)

    # localstripe opens its state file by that literal path; point it at ours.
    resources.open = redirected_open
    resources.store.try_load_from_disk()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    logging.basicConfig(level=logging.INFO)
    web.run_app(server.app, sock=sock, print=None)


if __name__ == "__main__":
    main()
