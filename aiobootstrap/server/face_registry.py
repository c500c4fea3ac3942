"""The installed faces, found rather than listed: a new face is a new folder, or another package's entry point.

The installed faces are

- every folder ``aiobootstrap/server/faces/<name>/`` whose ``face.py``
  defines ``FACE`` (a ``server.face.Face`` named ``<name>``), found by
  scanning the package's folder: no list names them; and
- every ``Face`` another installed distribution names under the entry point
  group ``aiobootstrap.faces`` (``toy = toy_face:FACE`` in its
  ``entry_points.txt``, ``[project.entry-points."aiobootstrap.faces"]`` in its
  ``pyproject.toml``), the entry point's name being the face's.

They are served in the order of ``Face.order`` (lower first), then of their
names: the order of the routes, of the OpenAPI paths and of what the page
and ``/metrics`` show. Two faces of one name are an error, never one hiding
the other. ``ServerConfig.faces`` (``--faces``) selects some by name
(:func:`select`). Each is loaded once a process (:func:`installed_faces`).

The command line needs the faces' options before it binds its port, and so
before aiohttp loads: :func:`installed_settings` reads a folder's settings
class from its ``settings.py`` (``SETTINGS``), which imports no aiohttp,
without loading its face; an entry point's face is loaded for its settings.
For that reason this module imports no face and no aiohttp: it finds them by
name with ``importlib``, and checks a loaded face by its fields.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import pkgutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import ServerConfig
    from .face import Face, FaceSettings

__all__ = [
    "ENTRY_POINT_GROUP",
    "FACES_PACKAGE",
    "face_names",
    "installed_faces",
    "installed_settings",
    "select",
    "select_names",
    "with_options",
]

ENTRY_POINT_GROUP = "aiobootstrap.faces"
"""The entry point group through which another package adds a face: each entry point names a ``Face``."""
FACES_PACKAGE = f"{__package__}.faces"
"""The package whose folders are the faces that ship with aiobootstrap."""


@dataclass(frozen=True, slots=True)
class _Found:
    """An installed face, not loaded yet: where its ``Face`` is, and its settings module if it has one."""

    name: str
    where: str
    """``module:attribute`` of its ``Face``."""
    settings_module: str | None = None
    """A folder's ``settings.py`` (defining ``SETTINGS``), read without loading the face."""
    entry_point: importlib.metadata.EntryPoint | None = None


@functools.cache
def _found() -> tuple[_Found, ...]:
    """Every installed face, by name; a name found twice is a ``ValueError`` naming both places."""
    found: dict[str, _Found] = {}
    for face in (*_folders(), *_entry_points()):
        if face.name in found:
            raise ValueError(
                f"two installed faces are named {face.name!r}: {found[face.name].where} and {face.where}"
            )
        if not face.name or "," in face.name or face.name != face.name.strip():
            raise ValueError(f"the face at {face.where} has no usable name ({face.name!r}): use a word")
        found[face.name] = face
    return tuple(found[name] for name in sorted(found))


def _folders() -> list[_Found]:
    """The folders of ``FACES_PACKAGE`` holding a ``face.py``, by name (imported: none of them). A folder is
    a face by its ``face.py`` alone, with an ``__init__.py`` or without (Python imports it either way);
    one without (``__pycache__``, a package the faces share) is none."""
    package = importlib.import_module(FACES_PACKAGE)
    found = []
    for root in package.__path__:
        for folder in sorted(os.scandir(root), key=lambda entry: entry.name):
            if not (folder.is_dir() and folder.name.isidentifier()) or folder.name == "__pycache__":
                continue
            modules = {module.name for module in pkgutil.iter_modules([folder.path])}
            if "face" in modules:
                module = f"{FACES_PACKAGE}.{folder.name}"
                settings = f"{module}.settings" if "settings" in modules else None
                found.append(_Found(folder.name, f"{module}.face:FACE", settings))
    return found


def _entry_points() -> list[_Found]:
    return [
        _Found(point.name, point.value, entry_point=point)
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    ]


def face_names() -> tuple[str, ...]:
    """The names of the installed faces, sorted; none of them loaded."""
    return tuple(face.name for face in _found())


@functools.cache
def installed_faces() -> tuple[Face, ...]:
    """Every installed face, loaded (once a process), in the order they are served."""
    faces = [_load(face) for face in _found()]
    return tuple(sorted(faces, key=lambda face: (face.order, face.name)))


def installed_settings() -> tuple[type[FaceSettings], ...]:
    """The settings classes of the installed faces, in the order of their names: a folder's from its
    ``settings.py`` (its face not loaded), an entry point's from its face."""
    classes = []
    for face in _found():
        if face.settings_module is not None:
            classes.append(importlib.import_module(face.settings_module).SETTINGS)
        elif face.entry_point is not None and (settings := _load(face).settings) is not None:
            classes.append(settings)
    return tuple(classes)


def select(faces: Iterable[Face], names: Sequence[str] | None) -> tuple[Face, ...]:
    """Those of ``faces`` that ``names`` names, and those served always (``Face.always``), in their order;
    ``None``: all. A name none of them has is a one-line ``ValueError`` naming the known ones."""
    faces = tuple(faces)
    if names is None:
        return faces
    select_names(names, [face.name for face in faces])
    return tuple(face for face in faces if face.name in names or face.always)


def with_options(config: ServerConfig, options: Mapping[str, Any]) -> ServerConfig:
    """``config`` with keyword ``options``: each a ``ServerConfig`` field, or a field of an installed face's
    settings class, set in that face's settings (``BootstrapServer(dp_room_ttl=60)`` and the in-process
    servers' keywords keep working as when the faces' settings were ``ServerConfig`` fields). Any other
    name is the ``TypeError`` of an unknown keyword argument."""
    own = {field.name for field in fields(config)}
    config = replace(config, **{name: value for name, value in options.items() if name in own})
    rest = {name: value for name, value in options.items() if name not in own}
    if not rest:
        return config
    for kind in installed_settings():
        names = {field.name for field in fields(kind)} & rest.keys()  # type: ignore[arg-type]
        if names:
            given = {name: rest.pop(name) for name in names}
            config = config.with_settings(replace(config.settings_of(kind), **given))  # type: ignore[type-var]
    if rest:
        raise TypeError(
            f"unexpected keyword argument {next(iter(rest))!r}: neither a ServerConfig field nor a face's setting"
        )
    return config


def select_names(names: Sequence[str], known: Sequence[str] | None = None) -> None:
    """A one-line ``ValueError`` unless every one of ``names`` is one of ``known`` (the installed faces'
    names unless told)."""
    known = face_names() if known is None else known
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise ValueError(f"no face is named {', '.join(map(repr, unknown))}: the faces are {listed}")


def _load(found: _Found) -> Face:
    """The ``Face`` at ``found.where``, checked: a ``Face`` (by its fields, see above) of the name it is
    found under. An entry point that fails to import is a ``ValueError`` naming the face and where it is."""
    if found.entry_point is not None:
        try:
            face: Any = found.entry_point.load()
        except Exception as exc:  # another package's bug or missing dependency: say which face
            raise ValueError(
                f"the face {found.name!r} ({ENTRY_POINT_GROUP} entry point {found.where}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    else:
        module, _, attribute = found.where.partition(":")
        face = getattr(importlib.import_module(module), attribute, None)
    fields = ("name", "routes", "access", "order", "settings")
    if face is None or not all(hasattr(face, field) for field in fields):
        raise ValueError(f"{found.where} is not an aiobootstrap face (a server.face.Face): {face!r}")
    if face.name != found.name:
        raise ValueError(f"the face at {found.where} is named {face.name!r}, but found as {found.name!r}")
    return face  # type: ignore[no-any-return]
