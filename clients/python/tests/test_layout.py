"""The package's shape: no import cycle between its modules (imports inside functions
and under ``TYPE_CHECKING`` included), and no module over 700 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 700


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (a directory of packages) by dotted name; a package is
    its ``__init__.py``."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path], top: str) -> set[str]:
    """The modules of package ``top`` that module ``name`` imports anywhere in its source:
    at the top, in functions, under ``if TYPE_CHECKING:``; relative or absolute.
    ``from package import x`` is an import of the module ``package.x`` when there is
    one, else of ``package``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            bases, names = [alias.name for alias in node.names], []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            bases, names = [base], [alias.name for alias in node.names]
        else:
            continue
        for base in bases:
            if base != top and not base.startswith(f"{top}."):
                continue
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
            if submodules:
                targets.update(submodules)
            if len(submodules) < len(names) or not names:
                while base not in known and "." in base:
                    base = base.rpartition(".")[0]
                targets.add(base)
    targets.discard(name)
    return targets


def cycles(root: Path, top: str) -> list[list[str]]:
    """The import cycles between the modules of package ``top`` under ``root``, each as
    the path of modules that closes it."""
    known = modules(root)
    graph = {name: sorted(imports(name, path, known, top)) for name, path in known.items()}
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in graph.get(name, []):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def test_no_module_of_the_client_imports_itself_back() -> None:
    assert "cairn.tracing" in imports("cairn._client", SRC / "cairn" / "_client.py", modules(SRC), "cairn"), (
        "the graph sees the client's imports"
    )
    assert cycles(SRC, "cairn") == []


@pytest.mark.parametrize(
    "where",
    [
        "from .a import f\n",
        "def g():\n    from . import a\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
        "import pkg.sub.c\n",
    ],
    ids=["relative", "in a function", "under TYPE_CHECKING", "absolute, through a package"],
)
def test_the_cycle_check_finds_each_kind_of_import(tmp_path: Path, where: str) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from ..b import g\n")
    (package / "sub" / "c.py").write_text("from ..a import f\n")
    (package / "a.py").write_text("from . import b\n\ndef f(): ...\n")
    (package / "b.py").write_text(where + "\ndef g(): ...\n")
    found = cycles(tmp_path, "pkg")
    assert found, where
    assert all(cycle[0] == cycle[-1] for cycle in found)
    assert cycles(tmp_path, "other") == []


def test_no_module_is_over_700_lines() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules(SRC).items()}
    assert "cairn.langgraph._saver" in sizes, sorted(sizes)
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
