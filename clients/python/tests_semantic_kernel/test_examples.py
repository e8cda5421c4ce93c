"""The complete scripts of the docs and of the client's README that use cairn.semantic_kernel run
as they are against the stack."""

from tests.conftest import example_tests

test_the_docs_have_examples, test_an_example_runs = example_tests("cairn.semantic_kernel")
