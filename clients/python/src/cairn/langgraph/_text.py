"""The strings the API accepts: UTF-8 without control characters, keys of bounded length."""

from __future__ import annotations

#: The longest key the API accepts (execution and checkpoint keys, task ids, channels).
KEY_MAX = 256


def utf8(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def control(c: str) -> bool:
    return c < " " or "\x7f" <= c <= "\x9f"


def key_ok(key: str) -> bool:
    """A key the API accepts (execution and checkpoint keys, task ids, channels)."""
    return 1 <= len(key) <= KEY_MAX and utf8(key) and not any(control(c) for c in key)


def text(s: str, limit: int) -> str:
    """``s`` without control characters, at most ``limit`` characters."""
    return "".join(" " if control(c) else c for c in s)[:limit]
