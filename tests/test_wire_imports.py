"""The package, the bench and the tests import wire's modules by name: ``wire/__init__`` is no facade.

``from ..wire import params`` or ``from ..wire.params import parse_ranks``
says where a callee lives; ``from .. import wire`` and ``wire.parse_ranks``
(a facade's re-exports) hide it. Read with ``ast``, like ``test_layout``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "aiobootstrap"
WIRE_MODULES = frozenset(path.stem for path in (PACKAGE / "wire").glob("*.py") if path.stem != "__init__")
CHECKED = [
    path
    for folder in ("aiobootstrap", "bench", "testbed", "tests")
    for path in sorted((PACKAGE.parent / folder).rglob("*.py"))
    if path != Path(__file__).resolve()
]
"""The modules held to it: all of them (but this test, whose strings show the forms it finds)."""


def _package_of(path: Path) -> list[str]:
    """The package ``path``'s relative imports start from (``a/b/__init__.py`` and ``a/b/c.py``: ``a.b``)."""
    return list(path.relative_to(PACKAGE.parent).parts[:-1])


def _facade_uses(path: Path, source: str | None = None) -> list[str]:
    """Each import of the facade in ``path`` (or ``source``, as if it were there): ``wire``, or a name it
    re-exports, or a lazy name read from it."""
    uses = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.ImportFrom):
            package = _package_of(path)
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [alias.name for alias in node.names]
            if module == "aiobootstrap":
                uses += [f"{node.lineno}: import wire" for name in names if name == "wire"]
            elif module == "aiobootstrap.wire":
                uses += [f"{node.lineno}: wire.{name}" for name in names if name not in WIRE_MODULES]
        elif isinstance(node, ast.Constant) and node.value == ".wire":
            uses.append(f"{node.lineno}: a lazy name from '.wire'")
    return uses


def test_every_module_imports_wire_by_module() -> None:
    found = {str(path.relative_to(PACKAGE.parent)): uses for path in CHECKED if (uses := _facade_uses(path))}
    assert not found, found


def test_wire_init_is_no_facade() -> None:
    """``wire/__init__`` holds its notes and no name: there is nothing to import through it."""
    body = ast.parse((PACKAGE / "wire" / "__init__.py").read_text()).body
    assert [type(node) for node in body] == [ast.Expr]


def test_the_check_sees_a_facade_import() -> None:
    """The check is not vacuous: each form of a facade import is found, and a module's import is not."""
    source = "from .. import wire\nfrom ..wire import parse_ranks, params\n_LAZY = {'X': '.wire'}\n"
    uses = _facade_uses(PACKAGE / "client" / "calls.py", source)
    assert uses == ["1: import wire", "2: wire.parse_ranks", "3: a lazy name from '.wire'"]
    assert not _facade_uses(PACKAGE / "client" / "calls.py", "from ..wire import params, routes\n")
    assert _facade_uses(PACKAGE / "server" / "openapi" / "__init__.py", "from ... import wire\n") == [
        "1: import wire"
    ]
