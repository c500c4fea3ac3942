"""The client, the CLI and the public names import wire's modules by name, never its facade.

``from ..wire import params`` or ``from ..wire.params import parse_ranks``
says where a callee lives; ``from .. import wire`` and ``wire.parse_ranks``
(the facade's re-exports) hide it. Read with ``ast``, like ``test_layout``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "aiobootstrap"
WIRE_MODULES = frozenset(path.stem for path in (PACKAGE / "wire").glob("*.py") if path.stem != "__init__")
CHECKED = [
    *sorted((PACKAGE / "client").rglob("*.py")),
    *sorted((PACKAGE / "cli").rglob("*.py")),
    PACKAGE / "exceptions.py",
    PACKAGE / "__init__.py",
]
"""The modules held to it (server/, core/ and store/ still use the facade in places)."""


def _package_of(path: Path) -> list[str]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts if path.stem == "__init__" else parts[:-1]


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


def test_the_client_and_the_cli_import_wire_by_module() -> None:
    found = {str(path.relative_to(PACKAGE.parent)): uses for path in CHECKED if (uses := _facade_uses(path))}
    assert not found, found


def test_the_check_sees_a_facade_import() -> None:
    """The check is not vacuous: each form of a facade import is found, and a module's import is not."""
    source = "from .. import wire\nfrom ..wire import parse_ranks, params\n_LAZY = {'X': '.wire'}\n"
    uses = _facade_uses(PACKAGE / "client" / "calls.py", source)
    assert uses == ["1: import wire", "2: wire.parse_ranks", "3: a lazy name from '.wire'"]
    assert not _facade_uses(PACKAGE / "client" / "calls.py", "from ..wire import params, routes\n")
