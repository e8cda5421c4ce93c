"""The OpenAI Agents SDK's own session tests, on ``CairnSession``.

The tests come from the SDK's sdist on PyPI, at the installed version (downloaded once
into the venv with pip, never kept in this repository), and run in a pytest of their
own with ``sdk_plugin``: each test that makes a ``SQLiteSession`` gets a ``CairnSession``
in its place, but those about SQLite itself (``sdk_plugin.EXCLUDED``, with the reason
for each)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from .conftest import URL, tenant_key

VERSION = importlib.metadata.version("openai-agents")
HERE = Path(__file__).resolve().parent
#: The SDK's test files that make SQLiteSessions (its session tests, its compaction
#: session's on a SQLiteSession, and runner tests that run with a session).
FILES = [
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_max_turns.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_soft_cancel.py",
    "tests/test_tool_failure_boundaries.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_run_impl_resume_paths.py",
]


def sdk_tests() -> Path:
    """The sdist's ``tests/`` and ``pyproject.toml`` (its pytest settings), in the venv."""
    root = Path(sys.prefix) / "cairn-sdists" / f"openai_agents-{VERSION}"
    if (root / "tests" / "conftest.py").exists():
        return root
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"openai-agents=={VERSION}",
                "--dest",
                download,
            ],
            check=True,
        )
        (archive,) = Path(download).glob("openai_agents-*.tar.gz")
        prefix = f"openai_agents-{VERSION}/"
        with tarfile.open(archive) as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.name.startswith(prefix + "tests/") or m.name == prefix + "pyproject.toml"
            ]
            tar.extractall(root.parent, members=members, filter="data")
    return root


def test_the_sdks_session_tests_pass_on_cairn_session(tmp_path: Path) -> None:
    key = tenant_key(credits=100_000)  # skips without the live stack
    root = sdk_tests()
    report = tmp_path / "sdk.xml"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(CAIRN_API_URL=str(URL), CAIRN_API_KEY=key, PYTHONPATH=str(HERE.parent))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests_openai_agents.sdk_plugin",
            "--junitxml",
            str(report),
            *FILES,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    passed = {
        case.get("classname", "").split(".")[-1] + "::" + case.get("name", "")
        for case in suite.iter("testcase")
    }
    print(f"the SDK's session tests on CairnSession (openai-agents {VERSION}): {counts}")
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0
    assert counts["tests"] >= 240  # every file's session tests were selected
    for name in (
        "test_session::test_sqlite_session_memory_pop_item",
        "test_session::test_sqlite_session_get_items_with_limit",
        "test_session::test_sqlite_session_concurrent_access",
        "test_session::test_session_memory_basic_functionality_parametrized[run_sync]",
        "test_session_limit::test_session_limit_parameter[run_streamed]",
    ):
        assert name in passed
