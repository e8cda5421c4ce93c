"""Fixtures of the live tests: the stack ``make test`` starts (``CAIRN_API_URL``) and
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own. Live tests are skipped without them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from cairn import Cairn

from . import resending

ADMIN = os.environ.get("CAIRN_TEST_ADMIN")
URL = os.environ.get("CAIRN_API_URL")

if URL:
    resending.install()


def admin(*args: str) -> str:
    if not ADMIN or not URL:
        pytest.skip("the live stack is not running (make test starts it)")
    return subprocess.run([ADMIN, *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def key() -> str:
    """The API key of a new tenant with 100 credits."""
    tenant = admin("tenant", "create", "--name", "python client")
    api_key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", "100")
    return api_key


@pytest.fixture
def client(key: str) -> Iterator[Cairn]:
    with Cairn(key, base_url=URL) as c:
        yield c
