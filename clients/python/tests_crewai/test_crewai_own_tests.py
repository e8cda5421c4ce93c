"""CrewAI's own persistence tests, from the PyPI sdist of the installed crewai (fetched
by pip into ``.local/crewai-sdist/`` once, never committed), run against
``CairnFlowPersistence`` on the running stack (``crewai_own_tests_plugin.py``).

With ``CAIRN_CREWAI_REPORT=path`` the counts are written there too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import crewai
import pytest

from .conftest import CLIENT_DIR, SITE, URL, tenant_key

pytestmark = pytest.mark.live

#: The sdist's test files about flow persistence (the factory, SQLite, pending feedback).
FILES = ("test_flow_persistence.py", "test_flow_persistence_factory.py", "test_async_human_feedback.py")
#: What they hold for crewai 1.15.30: every test passes but the one left out (the plugin's EXCLUDED).
EXPECTED = {"passed": 80, "deselected": 1}
#: How many of them make a persistence (the others test the rest of human feedback).
EXPECTED_ON_CAIRN = 50
PIP_DOWNLOAD = (
    sys.executable,
    "-m",
    "pip",
    "download",
    "--quiet",
    "--disable-pip-version-check",
    "--no-deps",
)
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")
CACHE = CLIENT_DIR.parents[1] / ".local" / "crewai-sdist"


def sdist_tests(version: str) -> Path:
    """The sdist's ``tests/`` directory, downloaded with pip and unpacked once."""
    tests = CACHE / f"crewai-{version}" / "tests"
    if all((tests / name).is_file() for name in FILES):
        return tests
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [*PIP_DOWNLOAD, "--no-binary", ":all:", f"crewai=={version}", "--dest", str(CACHE)],
        check=True,
    )
    with tarfile.open(CACHE / f"crewai-{version}.tar.gz") as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(f"crewai-{version}/tests/")]
        archive.extractall(CACHE, members=members, filter="data")
    return tests


def test_crewai_s_own_persistence_tests_pass_on_cairn(tmp_path: Path) -> None:
    source = sdist_tests(crewai.__version__)
    for name in FILES:
        shutil.copy(source / name, tmp_path / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    env = {**os.environ, "CAIRN_API_KEY": tenant_key(credits=2000), "CAIRN_API_URL": URL or ""}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLIENT_DIR), SITE, os.environ.get("PYTHONPATH")]))
    run = subprocess.run(
        [*PYTEST, "-p", "tests_crewai.crewai_own_tests_plugin", *FILES],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    counts = {
        word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary) if not word.startswith("warning")
    }
    used = re.search(r"cairn: (\d+) tests used CairnFlowPersistence", run.stdout)
    report = (
        f"crewai {crewai.__version__}'s own persistence tests on CairnFlowPersistence: {summary}"
        f" ({used.group(1) if used else '?'} of them used CairnFlowPersistence)"
    )
    print(report)
    if path := os.environ.get("CAIRN_CREWAI_REPORT"):
        Path(path).write_text(report + "\n")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert counts == EXPECTED, summary
    assert used is not None
    assert int(used.group(1)) == EXPECTED_ON_CAIRN
