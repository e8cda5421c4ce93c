"""The profile file's TOML: read with ``tomllib`` (3.11+), else ``tomli`` when installed,
else :func:`parse_minimal_toml`, the subset ``cairn login`` writes (Python 3.10 without
``tomli``); written by :func:`toml_dumps`.

The minimal parser stays (rather than ``tomli`` made a dependency for 3.10): it accepts
a few files ``tomllib`` refuses (JSON string escapes such as ``\\/`` and surrogate
pairs, leading non-ASCII white space), so replacing it would change what 3.10 reads.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable
from typing import Any, cast

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SECTION = re.compile(r"\[\s*([A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\")\s*\]\s*(#.*)?")
_PAIR = re.compile(r"([A-Za-z0-9_-]+)\s*=\s*(.*)")


def parse_minimal_toml(text: str) -> dict[str, Any]:
    """The subset of TOML that ``cairn login`` writes, for Python 3.10 without ``tomli``:
    ``[profile]`` (or ``["quoted"]``) tables of ``key = "string"`` (or ``'literal'``) pairs,
    comments and blank lines. Anything else is a ``ValueError``."""
    data: dict[str, Any] = {}
    table: dict[str, Any] | None = None
    decoder = json.JSONDecoder()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        section = _SECTION.fullmatch(line)
        if section:
            name = section.group(1)
            name = json.loads(name) if name.startswith('"') else name
            if name in data:
                raise ValueError(f"line {number}: table [{name}] defined twice")
            table = data[name] = {}
            continue
        pair = _PAIR.fullmatch(line)
        if pair is None or table is None:
            raise ValueError(f'line {number}: expected [profile] or key = "value"')
        key, rest = pair.groups()
        if rest.startswith('"') and not rest.startswith('"""'):
            try:
                value, end = decoder.raw_decode(rest)
            except json.JSONDecodeError:
                raise ValueError(f"line {number}: bad string") from None
        elif rest.startswith("'") and not rest.startswith("'''") and "'" in rest[1:]:
            end = rest.index("'", 1) + 1
            value = rest[1 : end - 1]
        else:
            raise ValueError(f"line {number}: only string values are supported")
        tail = rest[end:].strip()
        if tail and not tail.startswith("#"):
            raise ValueError(f"line {number}: unexpected {tail!r} after the value")
        if key in table:
            raise ValueError(f"line {number}: {key} defined twice")
        table[key] = value
    return data


def toml_loads() -> Callable[[str], dict[str, Any]]:
    """``tomllib.loads`` (3.11+), else ``tomli.loads`` if installed, else the minimal parser."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads
    try:
        tomli = importlib.import_module("tomli")
    except ImportError:
        return parse_minimal_toml
    return cast(Callable[[str], dict[str, Any]], tomli.loads)


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def toml_dumps(profiles: dict[str, dict[str, str]]) -> str:
    """Profiles as TOML (JSON string escapes are valid TOML basic strings)."""
    return "\n".join(
        f"[{_toml_key(name)}]\n" + "".join(f"{_toml_key(k)} = {json.dumps(v)}\n" for k, v in values.items())
        for name, values in profiles.items()
    )
