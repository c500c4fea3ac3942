"""What ``tests/test_layout.py`` reads in a module's source besides its imports: the words naming an
engine, and the imports made inside a function."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .package import import_source

__all__ = ["ENGINE_WORDS", "engine_words", "function_imports"]

ENGINE_WORDS = re.compile(
    r"encoder|mooncake|prefill|vllm|sglang|session_id|weights_info|transfer_engine|parallelism|rpc_meta"
    r"|dp_rank|tp_rank|topology",
    re.IGNORECASE,
)
"""An engine, a kind of an engine or an engine's field (``/work/shared/hooks/engine_words.py``'s list)."""


def _documentation(tree: ast.AST) -> set[int]:
    """The ids of the strings that document: a bare string statement (a docstring, or an attribute's)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _names(node: ast.AST) -> Iterator[str]:
    """The identifiers ``node`` itself writes (not its children's)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.keyword):
        yield node.arg or ""
    elif isinstance(node, ast.alias):
        yield node.name
        if node.asname:
            yield node.asname
    elif isinstance(node, ast.ImportFrom) and node.module:
        yield node.module


def engine_words(source: str, where: str) -> list[str]:
    """Each identifier and string literal of ``source`` (the file ``where``) naming an engine, as
    ``where:line: 'text'``; what documents (docstrings, an attribute's docstring) and comments are not read."""
    tree = ast.parse(source, where)
    documentation = _documentation(tree)
    found = []
    for node in ast.walk(tree):
        texts = list(_names(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation:
            texts.append(node.value)
        found += [(getattr(node, "lineno", 0), text) for text in texts if ENGINE_WORDS.search(text)]
    return [f"{where}:{line}: {text[:60]!r}" for line, text in sorted(found)]


_DYNAMIC = ("import_module", "__import__")
"""Calls that import a module named at run time (``importlib.import_module``, ``__import__``)."""


def function_imports(module: str, source: str, where: str, package: str) -> list[tuple[int, str]]:
    """Each import of a module of ``package`` made inside a function of ``module`` (the file ``where``), at
    any depth, as ``(line, module imported)``, and each call importing a module named at run time, as
    ``(line, "import_module")`` (or ``"__import__"``): what a module imports at its top is the whole of what
    it needs; an import inside a function hides one, most often to dodge a circle of imports."""
    own = module if where.endswith("__init__.py") else module.rpartition(".")[0]
    found: set[tuple[int, str]] = set()
    for function in ast.walk(ast.parse(source, where)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [import_source(own, node)]
            elif isinstance(node, ast.Call):
                called = node.func
                name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
                names = [name] if name in _DYNAMIC else []
                found.update((node.lineno, name) for name in names)
                continue
            else:
                continue
            found.update(
                (node.lineno, name) for name in names if name == package or name.startswith(package + ".")
            )
    return sorted(found)
