"""The classes the plugins put in the engines' place, made when a hook is installed.

:func:`drop_in` makes a subclass of the engine's own class (so ``isinstance``
and ``issubclass`` answer as they did: SGLang 0.5.23 asks
``issubclass(cls, CommonKVBootstrapServer)`` to choose its Rust server's
registry) whose method resolution finds aiobootstrap's in-process server
first: the engine's constructor never runs, and the arguments the engine
passes (its signature is the drop-in's) start aiobootstrap's server on the
plugins' :class:`ServerConfig`. With a namespace (``AIOBOOTSTRAP_NAMESPACE``)
the engine's ``(host, port)`` becomes a listener of that namespace
(``--listen``'s), and the server's own listener is on the loopback, on a
port the system chooses. :func:`missing` is the one ``WARNING`` for a
target the running engine lacks.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import types
from dataclasses import replace
from typing import Any

from ..server.config import NamespaceListener, ServerConfig

LOOPBACK = "127.0.0.1"
"""Where a drop-in serving a namespace has its own listener (the engine's address is the namespace's)."""

__all__ = ["drop_in", "is_drop_in", "missing", "resolve", "version_of"]

log = logging.getLogger("aiobootstrap")

_CONFIG = "_aiobootstrap_config"
"""The attribute a drop-in class keeps its config under (and by which :func:`is_drop_in` knows one)."""


def drop_in(
    original: type,
    server: type[Any],
    config: ServerConfig,
    *,
    namespace: str | None = None,
    inherit: bool = True,
) -> type:
    """A class named as ``original`` whose constructor is ``server``'s, given the engine's arguments and
    ``config=config`` (the engine's ``host`` and ``port``, its first two, a listener of ``namespace`` when
    one is given); a subclass of ``original`` too unless ``inherit`` is false (for a class whose own
    methods would run on it, such as a ``__del__``)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if namespace is None:
            server.__init__(self, *args, config=config, **kwargs)
            return
        rest, given = list(args), dict(kwargs)
        host = rest.pop(0) if rest else given.pop("host")
        port = rest.pop(0) if rest else given.pop("port")
        listener = NamespaceListener(int(port), namespace, host)
        listening = replace(config, listen=(*config.listen, listener))
        if "namespace" in inspect.signature(server.__init__).parameters:
            given["namespace"] = (
                namespace  # a server keeping a namespace's records in place (the encoder list)
            )
        server.__init__(self, LOOPBACK, 0, *rest, config=listening, **given)

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(
            __init__=__init__,
            __module__=__name__,
            __qualname__=original.__qualname__,
            __doc__=f"aiobootstrap's {server.__name__} in place of {original.__module__}.{original.__qualname__}.",
        )
        namespace[_CONFIG] = config

    bases = (server, original) if inherit else (server,)
    made: type = types.new_class(original.__name__, bases, exec_body=body)
    return made


def is_drop_in(cls: object) -> bool:
    """Whether ``cls`` is a class :func:`drop_in` made (a hook already applied, in a process loading twice)."""
    return isinstance(cls, type) and _CONFIG in vars(cls)


def resolve(target: str, engine: str) -> Any | None:
    """The object at the dotted path ``target`` (a module, then attributes), or ``None`` after one
    ``WARNING`` (:func:`missing`) when the running ``engine`` lacks it or its module fails to import."""
    module_name, _, attribute = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an engine's module failing for its own reasons: the target is not there
        missing(target, engine, f"{module_name} does not import: {type(exc).__name__}: {exc}")
        return None
    if not hasattr(module, attribute):
        missing(target, engine, f"{module_name} has no {attribute}")
        return None
    return getattr(module, attribute)


def missing(target: str, engine: str, why: str) -> None:
    """The one line for a target the running engine lacks (or that aiobootstrap cannot serve): the engine's
    own server keeps running."""
    log.warning(
        "aiobootstrap plugin: %s is not replaced (%s %s: %s); the engine's own server keeps running there",
        target,
        engine,
        version_of(engine),
        why,
    )


def version_of(distribution: str) -> str:
    """The installed version of ``distribution``, or ``?``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"
