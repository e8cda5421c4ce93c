"""The complete scripts of the docs and of the client's README that use cairn.agent_framework run
as they are against the stack."""

from __future__ import annotations

import pytest

from tests.conftest import examples, run_example, tenant_key

EXAMPLES = examples("cairn.agent_framework")


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) >= 2, "a script in docs/ and one in the client's README"


@pytest.mark.parametrize("code", EXAMPLES)
async def test_an_example_runs(code: str) -> None:
    done = await run_example(code, tenant_key(100, name="docs example"))
    assert done.returncode == 0, done.stderr[-3000:]
