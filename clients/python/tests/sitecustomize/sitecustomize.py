"""Run at start by the ``cairn`` subprocesses of test_live_cli (this directory is on
their ``PYTHONPATH``): they resend the local gateway's own 500s as the live tests'
clients in process do (tests/resending.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # clients/python, for `tests`

from tests import resending

resending.install()
