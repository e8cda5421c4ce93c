"""The Cairn metadata of a LangGraph checkpoint: its namespace and the scalar LangGraph
metadata, JSON-encoded within Cairn's bounds, so that the server filters on them; and
which part of a metadata filter the server can apply exactly."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from ._text import text, utf8

#: The Cairn metadata key of the checkpoint namespace (its value JSON-encoded).
NS_KEY = "checkpoint_ns"
#: The Cairn metadata key set when some LangGraph metadata did not fit Cairn's metadata
#: (a list with a metadata filter reads these checkpoints too, and checks them itself).
PARTIAL_KEY = "langgraph_partial"
#: Indexed first, so they always fit.
_FIRST_KEYS = ("source", "step", "run_id")
_RESERVED = frozenset({NS_KEY, PARTIAL_KEY})
#: Cairn's metadata bounds: keys, characters of a key and of a value, bytes of JSON
#: (with room to spare for the partial flag).
_MAX_KEYS, _KEY_CHARS, _VALUE_CHARS, _MAX_BYTES = 50, 40, 500, 16 * 1024 - 256


def _json_str(s: str) -> str | None:
    return json.dumps(s, ensure_ascii=False) if utf8(s) else None


def index_value(value: Any) -> str | None:
    """How a stored scalar is indexed: equal Python scalars get equal strings (``3`` and
    ``3.0`` both ``"3"``), except booleans (``"true"``) and None (``"null"``)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is str:
        return _json_str(value)
    if kind is int:
        return str(value) if value.bit_length() <= 1024 else None
    if kind is float:
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    return None


def _filter_value(value: Any) -> str | None:
    """The indexed string every stored value equal to ``value`` has, or None when the
    server cannot filter on it (None matches a missing key; ``True == 1 == 1.0``)."""
    kind = type(value)
    if kind is str:
        return _json_str(value)
    if kind is int and value not in (0, 1):
        return index_value(value)
    if kind is float and math.isfinite(value) and value not in (0.0, 1.0):
        return index_value(value)
    return None


def _indexable_key(key: Any) -> bool:
    return (
        type(key) is str
        and key not in _RESERVED
        and 1 <= len(key) <= _KEY_CHARS
        and utf8(key)
        and not any(c < " " for c in key)
    )


def ns_value(ns: str) -> str:
    """The namespace as the Cairn metadata holds it: JSON, or a digest when too long."""
    value = _json_str(ns)
    if value is None or len(value) > _VALUE_CHARS:
        return "sha256:" + hashlib.sha256(ns.encode("utf-8", "surrogatepass")).hexdigest()
    return value


def _entry_bytes(key: str, value: str) -> int:
    """Bytes of ``"key":"value",`` in compact JSON."""
    return len(json.dumps({key: value}, separators=(",", ":"), ensure_ascii=False).encode()) - 1


def cairn_metadata(ns: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """The Cairn metadata of a checkpoint: the namespace, then the scalar LangGraph
    metadata that fits (``source``, ``step``, ``run_id`` first); the partial flag when
    some that could be filtered on did not fit."""
    index = {NS_KEY: ns_value(ns)}
    size = 2 + _entry_bytes(NS_KEY, index[NS_KEY])
    first = [k for k in _FIRST_KEYS if k in metadata]
    partial = False
    for key in first + sorted(k for k in metadata if k not in _FIRST_KEYS and isinstance(k, str)):
        if not _indexable_key(key):
            continue
        value = metadata[key]
        if type(value) in (dict, list, tuple, set, frozenset, bytes, bytearray):
            continue  # never equal to a scalar filter
        indexed = index_value(value)
        if indexed is None:
            partial = True  # an object that may equal a scalar (an enum, numpy, Decimal)
            continue
        if len(indexed) > _VALUE_CHARS:
            continue  # equal to no filter value that fits
        grown = size + _entry_bytes(key, indexed)
        if len(index) >= _MAX_KEYS - 1 or grown > _MAX_BYTES:
            partial = True
            continue
        index[key], size = indexed, grown
    if partial:
        index[PARTIAL_KEY] = "true"
    return index


def checkpoint_name(metadata: Mapping[str, Any], ns: str) -> str | None:
    source, step = metadata.get("source"), metadata.get("step")
    if not isinstance(source, str) or type(step) is not int:
        return None
    name = f"{source} {step}" + (f" in {ns}" if ns else "")
    return text(name, 200).strip() or None


def matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(metadata.get(k) == v for k, v in filter.items())


def server_filter(filter: Mapping[str, Any] | None) -> dict[str, str]:
    """The part of a metadata filter the server can apply exactly."""
    out: dict[str, str] = {}
    for key, value in (filter or {}).items():
        indexed = _filter_value(value)
        if _indexable_key(key) and indexed is not None and len(indexed) <= _VALUE_CHARS:
            out[key] = indexed
    return out
