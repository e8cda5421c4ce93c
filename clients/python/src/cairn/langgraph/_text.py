"""The strings the API accepts: UTF-8 without control characters, keys of bounded length."""

from __future__ import annotations

from .._runs import KEY_MAX, control, key_ok, utf8

__all__ = ["KEY_MAX", "control", "key_ok", "text", "utf8"]


def text(s: str, limit: int) -> str:
    """``s`` without control characters, at most ``limit`` characters."""
    return "".join(" " if control(c) else c for c in s)[:limit]
