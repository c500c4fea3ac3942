"""The package's modules and what each imports, read with ``ast`` (``tests/test_layout.py``'s checks)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MODULES", "PACKAGE", "TESTS", "import_source", "imports_of"]

TESTS = Path(__file__).resolve().parent.parent
PACKAGE = TESTS.parent / "aiobootstrap"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def import_source(package: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in ``package`` reads from, its dots resolved."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """Every module of the package or outside it that ``module`` imports, at any depth, with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            source = import_source(package, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if submodule in MODULES else source
