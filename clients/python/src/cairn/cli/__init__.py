"""``cairn``: the Cairn API from the command line, on the client library.

One module per resource (``workflows``, ``executions``, ``checkpoints``, ``failures``,
``billing``, ``keys``), as ``gh`` is organised; ``app`` is the root group, ``login`` and
the error handling; ``config`` the profiles and the options of one invocation; ``output``
tables, fields and ``--json``; ``toml`` the profile file's format.

Configuration, setting by setting, strongest first:

1. ``--api-key`` / ``--api-url``;
2. ``CAIRN_API_KEY`` / ``CAIRN_API_URL``;
3. the profile (``--profile``, default ``default``) in ``$XDG_CONFIG_HOME/cairn/config.toml``
   (``~/.config/cairn/config.toml`` without ``XDG_CONFIG_HOME``): a TOML table per profile with
   ``api_key`` and ``api_url``, as ``cairn login`` writes it (mode 0600);
4. for the URL, the library's default (the local stack).

Output: tables for people; ``--json`` prints the API's JSON unchanged (a list prints a JSON
array of its items). A list prints its first page and says on stderr how much it left out;
``--all`` follows every page (with a progress bar on stderr when that is a terminal).

Exit codes:

====  ==========================================================================
0     ok
1     error: any other API error, a connection error or timeout, a local file error
2     usage (click's own: unknown command or option, bad value)
3     not found (``not_found``)
4     unauthorized (``unauthorized``), or no API key configured
5     invalid state or conflict (``invalid_state``, ``version_mismatch``, ``idempotency_in_progress``)
6     invalid input (``validation_failed``, ``payload_too_large``, ``malformed_request``)
7     insufficient credits (``insufficient_credits``)
====  ==========================================================================

An error is printed on stderr as ``error: <code>: <detail>``, then its field errors and
``request id: ...`` when it has them; never as a Python traceback.
"""

from __future__ import annotations

from .app import cli, main
from .config import read_profiles
from .toml import parse_minimal_toml, toml_dumps

__all__ = ["cli", "main", "parse_minimal_toml", "read_profiles", "toml_dumps"]
