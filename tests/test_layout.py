"""The package's shape, read from its imports with ``ast``: floors that import only downwards.

``docs/architecture.md`` draws the floors. Each module stands on one; it may
import a module of a lower floor, or one of its own folder, and nothing else:
the server and the client never import each other, the store and the wire
never import each other, and nothing imports the package root. A module that
could not be placed, a circle of imports, or a module too long to read in one
sitting fails here, naming the files. So does a module of the server or the
CLI that reaches the store past the registry, and a face that imports
another face (or the fast path a face), naming the file and the line.

Inside ``server/`` the floors are the host, the faces (``server/faces/``) and
the in-process servers (``threaded.py``, each face's ``inprocess.py``), low to
high; each fails here, with its file and line: an import running up them, a
face's module imported from outside its folder (but by the in-process floor,
the face registry and the package's public names), an identifier or string
naming an engine in the core, the stores or the host, a class built on
``ServerInThread`` below the in-process floor, and an import inside a function
that :data:`FUNCTION_IMPORTS` gives no reason for.

The suite has a shape too: a test module never imports another test module nor
``conftest.py``; what modules share is in ``tests/helpers/``; the bench and the
testbed (the real servers both start) import no test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .helpers.package import MODULES, PACKAGE, TESTS, import_source, imports_of
from .helpers.source_scan import engine_words, function_imports

FLOORS = {
    # Leaves: they import nothing of the package but each other.
    "aiobootstrap._version": 0,
    "aiobootstrap._names": 0,
    "aiobootstrap._json": 0,
    "aiobootstrap._ranks": 0,
    "aiobootstrap._logging": 0,
    "aiobootstrap._loopthread": 0,
    "aiobootstrap.exceptions": 1,
    "aiobootstrap.store": 2,
    "aiobootstrap.wire": 2,
    "aiobootstrap.core": 3,
    "aiobootstrap.server": 4,
    "aiobootstrap.client": 4,
    "aiobootstrap.cli": 5,
    # The engine plugins: above the in-process servers and the command line (whose reading of the
    # environment they reuse); the engines import them, nothing of the package does.
    "aiobootstrap.plugins": 6,
    "aiobootstrap.__main__": 7,
    "aiobootstrap": 7,
}
"""The floor of each room, a folder or a module; a module is on the floor of its longest prefix here."""

LEAVES = 0

WITHOUT_AIOHTTP = (
    "aiobootstrap.core",
    "aiobootstrap.store",
    "aiobootstrap.wire",
    "aiobootstrap.exceptions",
)
"""Rooms that must not know HTTP's library: the registry is pure asyncio, the store and the wire do no HTTP."""

MAX_LINES = 400


def _room(module: str) -> str:
    """The longest prefix of ``module`` that :data:`FLOORS` names."""
    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        if name in FLOORS:
            return name
        parts.pop()
    raise AssertionError(f"{module} stands on no floor: add its folder or module to FLOORS")


def _package_imports(module: str) -> set[str]:
    """The package's modules ``module`` imports (a folder's ``__init__`` importing its own rooms aside)."""
    found = set()
    for _, name in imports_of(module, MODULES[module]):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module and not name.startswith(module + "."):
            found.add(name)
    return found


GRAPH = {module: _package_imports(module) for module in MODULES}


def _wrong_imports(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, imported in graph.items():
        room = _room(module)
        for other in sorted(imported):
            other_room = _room(other)
            same_room = other_room == room or FLOORS[room] == FLOORS[other_room] == LEAVES
            if not same_room and FLOORS[other_room] >= FLOORS[room]:
                wrong.append(f"{module} (floor {FLOORS[room]}) imports {other} (floor {FLOORS[other_room]})")
    return wrong


def test_every_module_imports_only_a_lower_floor_or_its_own_folder() -> None:
    """No import runs back up or sideways: server and client, store and wire, stay apart."""
    wrong = _wrong_imports(GRAPH)
    assert not wrong, "\n".join(wrong)


def test_the_floor_check_refuses_upward_and_sideways_imports() -> None:
    """The check is not vacuous: an upward, a sideways and a root import are each named."""
    graph = {
        "aiobootstrap.store.memory": {"aiobootstrap.server.app"},
        "aiobootstrap.server.app": {"aiobootstrap.client.client", "aiobootstrap.store.memory"},
        "aiobootstrap.wire.routes": {"aiobootstrap"},
    }
    assert _wrong_imports(graph) == [
        "aiobootstrap.store.memory (floor 2) imports aiobootstrap.server.app (floor 4)",
        "aiobootstrap.server.app (floor 4) imports aiobootstrap.client.client (floor 4)",
        "aiobootstrap.wire.routes (floor 2) imports aiobootstrap (floor 7)",
    ]


def test_there_is_no_circle_of_imports() -> None:
    """Not even inside one folder: every module can be read knowing only what it imports."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    circles = []

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        for other in sorted(GRAPH[module]):
            if state.get(other) == 1:
                circles.append(" -> ".join([*path[path.index(other) :], other]))
            elif other not in state:
                walk(other, [*path, other])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            walk(module, [module])
    assert not circles, "\n".join(circles)


@pytest.mark.parametrize("room", WITHOUT_AIOHTTP)
def test_the_lower_floors_do_not_import_aiohttp(room: str) -> None:
    """The registry, the store, the wire and the error tree can be used and tested without HTTP."""
    offenders = [
        f"{module}:{line} imports {name}"
        for module, path in MODULES.items()
        if module == room or module.startswith(room + ".")
        for line, name in imports_of(module, path)
        if name == "aiohttp" or name.startswith("aiohttp.")
    ]
    assert not offenders, "\n".join(offenders)


def test_no_module_is_too_long_to_read_in_one_sitting() -> None:
    """Each module stays under the size the aio-libs modules keep (aim at ~300 lines)."""
    long = {
        str(path.relative_to(PACKAGE.parent)): count
        for path in MODULES.values()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"


def _is_test_module(name: str) -> bool:
    """``tests.test_*`` or ``tests.conftest``, or either as pytest's rootdir import (``test_cli``)."""
    parts = name.split(".")
    if parts[0] == TESTS.name:
        parts = parts[1:]
    return bool(parts) and (parts[0] == "conftest" or parts[0].startswith("test_"))


def _test_imports(path: Path, source: str) -> list[str]:
    """Each import, at any depth, of a test module or of ``conftest`` in ``source`` (the file ``path``
    of the suite), as ``file:line imports module``."""
    package = ".".join(path.relative_to(TESTS.parent).parent.parts)
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = import_source(package, node)
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if _is_test_module(name):
                found.append((node.lineno, f"{path.relative_to(TESTS.parent)}:{node.lineno} imports {name}"))
                break
    return [text for _, text in sorted(found)]


def test_no_module_of_the_suite_imports_a_test_module_or_conftest() -> None:
    """Test modules share helpers through ``tests/helpers/``, never through each other or ``conftest.py``
    (which holds fixtures and hooks only): a helper has one plain home, and no module's tests or
    fixtures come along with an import of it."""
    offenders = [
        offender for path in sorted(TESTS.rglob("*.py")) for offender in _test_imports(path, path.read_text())
    ]
    assert not offenders, "\n".join(offenders)


# -- no face imports another ----------------------------------------------

FACES = "aiobootstrap.server.faces"


def _face_of(name: str) -> str | None:
    """The face folder (``server/faces/<face>/``) of the module ``name``, or ``None``."""
    rest = name.removeprefix(FACES + ".").split(".") if name.startswith(FACES + ".") else []
    return rest[0] if len(rest) > 1 or (rest and MODULES.get(name, Path()).name == "__init__.py") else None


def _face_crossings(module: str, imported: list[tuple[int, str]], where: str) -> list[str]:
    """Each import (once a line) of ``module`` (file ``where``) of another face or the faces' list, or from the
    fast path of a face."""
    own, fastpath = _face_of(module), module.startswith("aiobootstrap.server.fastpath")
    faces = [name for _, name in imported if f"{name}.".startswith(FACES + ".")]
    crossing = {
        name for name in faces if fastpath or (own and (name == FACES or _face_of(name) not in (None, own)))
    }
    return [f"{where}:{line} imports {name}" for line, name in sorted(set(imported)) if name in crossing]


def test_no_face_imports_another_nor_the_fast_path_a_face() -> None:
    """A face is added or removed alone: what faces share is in ``server/faces/`` beside them, or below."""
    offenders = []
    for module, path in MODULES.items():
        where = str(path.relative_to(PACKAGE.parent))
        offenders += _face_crossings(module, list(imports_of(module, path)), where)
    assert not offenders, "\n".join(offenders)


def test_the_face_check_names_each_import_of_another_face() -> None:
    """The check is not vacuous: another face's module or folder, the faces' list, and any face from the fast
    path are each named with their line; the face's own modules and the faces' shared ones pass."""
    f = FACES
    imported = [(1, f"{f}.encoders.health"), (2, f"{f}.engine_info"), (3, f), (4, f"{f}.common")]
    assert _face_crossings(f"{f}.native.watch", [*imported, (5, f"{f}.native.page")], "w.py") == [
        f"w.py:1 imports {f}.encoders.health",
        f"w.py:2 imports {f}.engine_info",
        f"w.py:3 imports {f}",
    ]
    assert _face_crossings("aiobootstrap.server.fastpath.gets", [(7, f"{f}.kinds")], "g.py") == [
        f"g.py:7 imports {f}.kinds"
    ]
    assert not _face_crossings(f"{f}.toy.face", [(1, f"{f}.kinds"), (2, f"{f}.toy.routes")], "t.py")


# -- floors inside server/: the host, the faces, the in-process servers ----

SERVER = "aiobootstrap.server"
THREADED = "aiobootstrap.server.threaded"
IN_PROCESS_MODULE = "inprocess"
"""A face's in-process drop-in is ``faces/<name>/inprocess.py`` (or a folder of that name)."""

SERVER_FLOORS = ("host", "faces", "in-process")
"""The floors inside ``server/``, low to high: the host, then the faces (``server/faces/``: the face list, what
faces share, each face's folder), then the in-process servers (:data:`THREADED` and each face's
``inprocess`` module), which may import both floors below them."""


def _server_floor(module: str) -> int | None:
    """The floor (an index of :data:`SERVER_FLOORS`) of ``module`` inside ``server/``, or ``None`` outside it."""
    if module != SERVER and not module.startswith(SERVER + "."):
        return None
    if module == THREADED or module.startswith(THREADED + "."):
        return 2
    if module == FACES or module.startswith(FACES + "."):
        rest = module.removeprefix(FACES + ".").split(".")
        return 2 if len(rest) > 1 and rest[1] == IN_PROCESS_MODULE else 1
    return 0


def _in_package(name: str) -> str | None:
    """The module of the package that an imported ``name`` is (or is in), or ``None`` for another package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports_up_in_server(module: str, imported: list[tuple[int, str]], where: str) -> list[str]:
    """Each import (once a line) of ``module`` (file ``where``) of a higher floor inside ``server/``."""
    floor = _server_floor(module)
    found = set()
    for line, name in imported:
        other = _in_package(name) if floor is not None else None
        other_floor = None if other is None else _server_floor(other)
        if floor is not None and other_floor is not None and other_floor > floor:
            found.add(
                (
                    line,
                    f"{where}:{line} ({SERVER_FLOORS[floor]}) imports {other} ({SERVER_FLOORS[other_floor]})",
                )
            )
    return [text for _, text in sorted(found)]


def test_no_import_runs_up_inside_the_server() -> None:
    """The host imports no face and no in-process server; a face imports no in-process server: the host is
    whole without a face, and a face without the thread that hosts an engine's drop-in."""
    offenders = []
    for module, path in MODULES.items():
        where = str(path.relative_to(PACKAGE.parent))
        offenders += _imports_up_in_server(module, list(imports_of(module, path)), where)
    assert not offenders, "\n".join(offenders)


def test_the_server_floor_check_names_each_import_running_up() -> None:
    """The check is not vacuous: the host importing a face, the face list or an in-process server, and a face
    importing an in-process server (its own face's included) are each named with their line; imports down or
    on one floor, and of other packages, pass."""
    f, s = FACES, SERVER
    host = [
        (1, f"{f}.native.watch"),
        (2, f),
        (3, f"{s}.threaded"),
        (4, f"{f}.encoders.inprocess"),
        (5, "aiohttp"),
    ]
    assert _imports_up_in_server(f"{s}.auth", [*host, (6, f"{s}.errors")], "a.py") == [
        f"a.py:1 (host) imports {f}.native.watch (faces)",
        f"a.py:2 (host) imports {f} (faces)",
        f"a.py:3 (host) imports {s}.threaded (in-process)",
        f"a.py:4 (host) imports {f}.encoders.inprocess (in-process)",
    ]
    face = [
        (1, f"{f}.encoders.inprocess"),
        (2, f"{s}.threaded"),
        (3, f"{f}.encoders.health"),
        (4, f"{s}.app"),
    ]
    assert _imports_up_in_server(f"{f}.encoders.routes", face, "r.py") == [
        f"r.py:1 (faces) imports {f}.encoders.inprocess (in-process)",
        f"r.py:2 (faces) imports {s}.threaded (in-process)",
    ]
    drop_in = [(1, f"{s}.threaded"), (2, f"{f}.encoders.health"), (3, f"{f}.kinds"), (4, f"{s}.server")]
    assert not _imports_up_in_server(f"{f}.encoders.inprocess", drop_in, "i.py")
    assert not _imports_up_in_server(f"{s}.threaded", [(1, f"{f}.kinds"), (2, f"{s}.server")], "t.py")
    assert not _imports_up_in_server("aiobootstrap.cli.main", [(1, f"{s}.threaded")], "m.py")


IN_THREAD_BASE = ("aiobootstrap.server.in_thread", "ServerInThread")
"""The host's server in a thread (it names no engine): every class built on it is an in-process server."""


def _misplaced_drop_ins(classes: list[tuple[str, str, list[str]]]) -> list[str]:
    """Each class built on :data:`IN_THREAD_BASE`, directly or through another, that stands below the
    in-process floor. ``classes``: each class's module, name and the names of its bases."""
    built = {IN_THREAD_BASE[1]}
    while grown := {name for _, name, bases in classes if name not in built and built & set(bases)}:
        built |= grown
    return sorted(
        f"{module}.{name} is built on {IN_THREAD_BASE[1]}: an in-process server, on the in-process floor"
        for module, name, _ in classes
        if name in built and (module, name) != IN_THREAD_BASE and _server_floor(module) != 2
    )


def _classes() -> list[tuple[str, str, list[str]]]:
    """Every class of the package: its module, its name and its bases' names."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2].partition("[")[0] for base in node.bases]
                found.append((module, node.name, bases))
    return found


def test_every_in_process_server_is_on_the_in_process_floor() -> None:
    """``ThreadedBootstrapServer`` and every face's drop-in (``faces/<name>/inprocess.py``) host a server in a
    thread: none is in the host or a face's own floor, which a drop-in may import but not the other way."""
    misplaced = _misplaced_drop_ins(_classes())
    assert not misplaced, "\n".join(misplaced)
    assert {"ThreadedBootstrapServer", "EncoderBootstrapServer", "PrefillBootstrapServer"} <= {
        name for module, name, _ in _classes() if _server_floor(module) == 2
    }


def test_the_drop_in_check_names_each_in_process_server_below_its_floor() -> None:
    """The check is not vacuous: a class built on the base, directly or through a drop-in, outside the
    in-process floor is named; the base itself, drop-ins on the floor and unrelated classes pass."""
    s, f = SERVER, FACES
    classes = [
        (f"{s}.in_thread", "ServerInThread", ["LoopThreadOwner"]),
        (THREADED, "ThreadedBootstrapServer", ["ServerInThread"]),
        (f"{f}.toy.inprocess", "ToyBootstrapServer", ["ThreadedBootstrapServer"]),
        (f"{f}.toy.server", "ToyServer", ["ToyBootstrapServer"]),
        (f"{s}.app", "HostServer", ["ServerInThread"]),
        (f"{s}.face", "Face", []),
    ]
    assert _misplaced_drop_ins(classes) == [
        f"{s}.app.HostServer is built on ServerInThread: an in-process server, on the in-process floor",
        f"{f}.toy.server.ToyServer is built on ServerInThread: an in-process server, on the in-process floor",
    ]


# -- a face's modules are its own -----------------------------------------

FACE_FINDERS = {
    "aiobootstrap": "the package's public names, each imported on first use (``_LAZY``): the drop-ins among them",
    "aiobootstrap.server.face_registry": "the faces found (by name, with importlib): the one way to them",
}
"""Who may import a face's modules besides the face's own folder and the in-process floor, and why."""


PLUGINS = "aiobootstrap.plugins"
"""The engine plugins' floor, above the in-process servers: it may import a face's drop-in (``inprocess``), no
other module of a face."""


def _face_outsiders(module: str, imported: list[tuple[int, str]], where: str) -> list[str]:
    """Each import (once a line) by ``module`` (file ``where``) of a face's module from outside that face's
    folder, unless ``module`` is on the in-process floor or in :data:`FACE_FINDERS`, or it is the drop-in
    (``inprocess``) a plugin (:data:`PLUGINS`) imports."""
    if module in FACE_FINDERS or _server_floor(module) == 2:
        return []
    plugin = module == PLUGINS or module.startswith(PLUGINS + ".")
    found = set()
    for line, name in imported:
        other = _in_package(name)
        face = None if other is None else _face_of(other)
        if plugin and other is not None and _server_floor(other) == 2:
            continue
        if face is not None and face != _face_of(module):
            found.add((line, f"{where}:{line} imports {other}, of the {face} face"))
    return [text for _, text in sorted(found)]


def test_a_face_is_imported_only_from_its_own_folder() -> None:
    """Nothing reaches into a face but its own folder, the in-process servers, the face registry and the
    package's public names: a face removed is a folder removed."""
    offenders = []
    for module, path in MODULES.items():
        where = str(path.relative_to(PACKAGE.parent))
        offenders += _face_outsiders(module, list(imports_of(module, path)), where)
    assert not offenders, "\n".join(offenders)


def test_the_face_folder_check_names_each_import_from_outside() -> None:
    """The check is not vacuous: a face's module or folder imported by the host, the CLI or another face is
    named with its line; the face's own modules, the faces' shared ones, the in-process floor and the
    finders pass."""
    f = FACES
    imported = [(1, f"{f}.prefill.routes"), (2, f"{f}.native"), (3, f"{f}.kinds"), (4, "aiobootstrap.wire")]
    assert _face_outsiders("aiobootstrap.cli.parser", imported, "p.py") == [
        f"p.py:1 imports {f}.prefill.routes, of the prefill face",
        f"p.py:2 imports {f}.native, of the native face",
    ]
    assert _face_outsiders(f"{f}.mooncake.routes", [(9, f"{f}.prefill.rooms.x")], "r.py") == [
        f"r.py:9 imports {f}.prefill.rooms, of the prefill face"
    ]
    assert not _face_outsiders(f"{f}.prefill.routes", [(1, f"{f}.prefill.rooms"), (2, f"{f}.common")], "r.py")
    assert not _face_outsiders(f"{f}.encoders.inprocess", [(1, f"{f}.encoders.health")], "i.py")
    assert not _face_outsiders(THREADED, [(1, f"{f}.engine_info.inprocess")], "t.py")
    assert not _face_outsiders("aiobootstrap", [(1, f"{f}.prefill.inprocess")], "__init__.py")
    assert not _face_outsiders(f"{PLUGINS}.sglang_targets", [(1, f"{f}.prefill.inprocess")], "s.py")
    assert _face_outsiders(f"{PLUGINS}.sglang_targets", [(1, f"{f}.prefill.settings")], "s.py") == [
        f"s.py:1 imports {f}.prefill.settings, of the prefill face"
    ]


# -- the core, the stores and the host name no engine ----------------------

ENGINE_FREE = ("aiobootstrap.core", "aiobootstrap.store")
"""Rooms that name no engine, beside the host floor of ``server/``."""


def _names_no_engine(module: str) -> bool:
    in_room = any(module == room or module.startswith(room + ".") for room in ENGINE_FREE)
    return in_room or _server_floor(module) == 0


def test_the_core_the_stores_and_the_host_name_no_engine() -> None:
    """No identifier or string literal of the core, the stores or the host names an engine, an engine's kind
    or field (docstrings may, as examples): what is an engine's is its face's, declared to the host."""
    offenders = [
        hit
        for module, path in MODULES.items()
        if _names_no_engine(module)
        for hit in engine_words(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert not offenders, f"{len(offenders)} engine words:\n" + "\n".join(offenders)


def test_the_engine_word_check_names_identifiers_and_strings_not_documentation() -> None:
    """The check is not vacuous: a name, an attribute, a function, an argument, a keyword, an import and a
    string naming an engine are each named with their line; docstrings (an attribute's too) and comments
    are not; and the rooms it reads are the core, the stores and the host, not the faces nor threaded.py."""
    source = "\n".join(
        [
            '"""The module: SGLang\'s prefill, as an example."""',
            "from ..wire.prefill import PREFILL_RANK",
            "import json as mooncake_json  # a comment: vllm",
            "def count(record, *, parallelism=None):",
            '    """A docstring naming transfer_engine_info."""',
            "    return record.session_id, f(weights_info_dict=1), {'encoder_urls': 1}",
            "ORDER = 1",
            '"""An attribute\'s docstring: mooncake."""',
            "class SglangThing:",
            "    x = 'a Topology'",
        ]
    )
    assert engine_words(source, "m.py") == [
        "m.py:2: 'PREFILL_RANK'",
        "m.py:2: 'wire.prefill'",
        "m.py:3: 'mooncake_json'",
        "m.py:4: 'parallelism'",
        "m.py:6: 'encoder_urls'",
        "m.py:6: 'session_id'",
        "m.py:6: 'weights_info_dict'",
        "m.py:9: 'SglangThing'",
        "m.py:10: 'a Topology'",
    ]
    rooms = {m: _names_no_engine(m) for m in ("aiobootstrap.core.history", "aiobootstrap.store.memory")}
    rooms |= {
        m: _names_no_engine(m) for m in (f"{SERVER}.app", f"{SERVER}.fastpath.gets", f"{SERVER}.openapi")
    }
    rooms |= {
        m: _names_no_engine(m) for m in (FACES, f"{FACES}.prefill.routes", THREADED, "aiobootstrap.wire")
    }
    assert [m for m, checked in rooms.items() if checked] == [
        "aiobootstrap.core.history",
        "aiobootstrap.store.memory",
        f"{SERVER}.app",
        f"{SERVER}.fastpath.gets",
        f"{SERVER}.openapi",
    ]


# -- no import inside a function ------------------------------------------

FUNCTION_IMPORTS = {
    (
        "aiobootstrap.cli.main",
        "aiobootstrap.server.server",
    ): "the port is bound before aiohttp is imported, so "
    "a taken port, the commonest start-up failure, is told without waiting for it (cli/main.py)",
    ("aiobootstrap.cli.main", "aiobootstrap.server.bind"): "a tool binds nothing, and naming a port's holder "
    "costs 13 ms to import",
    (
        "aiobootstrap.cli.tools",
        "aiobootstrap.client.client",
    ): "serving imports the tools' table, never the client",
    (
        "aiobootstrap.store.url",
        "aiobootstrap.store.file",
    ): "a store's modules are imported when a URL names it",
    (
        "aiobootstrap.store.url",
        "aiobootstrap.store.redis",
    ): "redis-py is an extra, imported when a URL names it",
    ("aiobootstrap.store.url", "aiobootstrap.store.etcd"): "aetcd is an extra, imported when a URL names it",
    ("aiobootstrap", "import_module"): "the public names, each imported on first use (PEP 562)",
    ("aiobootstrap.plugins.sglang", "import_module"): "installed is not enabled: SGLang runs the plugin in "
    "every process, which imports the server only once a setting enables it",
    ("aiobootstrap.plugins.vllm", "import_module"): "installed is not enabled: vLLM runs the plugin in "
    "every process, which imports the server only once a setting enables it",
    ("aiobootstrap.plugins.dropins", "import_module"): "an engine's module, named by a target's dotted path "
    "and imported only once the plugin is enabled (a module the running version lacks is a warning)",
    (
        "aiobootstrap.server.face_registry",
        "import_module",
    ): "the faces, found by name: discovery, not a dodge",
}
"""The only imports inside a function of the package, and why each is not one at the top: never a circle."""


def _function_imports(module: str, source: str, where: str) -> list[str]:
    """Each import of the package (or by a name given at run time) made inside a function of ``module``."""
    return [
        f"{where}:{line} imports {name} inside a function"
        for line, name in function_imports(module, source, where, PACKAGE.name)
        if (module, name) not in FUNCTION_IMPORTS
    ]


def test_no_module_imports_inside_a_function() -> None:
    """A module's imports are at its top, where a reader and this file see them: an import inside a function
    hides a circle of imports rather than ending it. :data:`FUNCTION_IMPORTS` names the few that are not that,
    and each of them is still made (the list does not outlive its reasons)."""
    offenders, made = [], set()
    for module, path in MODULES.items():
        source, where = path.read_text(), str(path.relative_to(PACKAGE.parent))
        offenders += _function_imports(module, source, where)
        made |= {(module, name) for _, name in function_imports(module, source, where, PACKAGE.name)}
    offenders += [
        f"FUNCTION_IMPORTS names {entry}, an import no longer made"
        for entry in FUNCTION_IMPORTS.keys() - made
    ]
    assert not offenders, "\n".join(offenders)


def test_the_function_import_check_names_each_import_inside_a_function() -> None:
    """The check is not vacuous: absolute, relative, nested and run-time imports of the package inside a
    function or a method are each named with their line; imports at the top, of other packages, and those
    :data:`FUNCTION_IMPORTS` gives a reason for pass."""
    source = "\n".join(
        [
            "from ..faces import FACES",
            "import importlib",
            "def document(faces=None):",
            "    from ..faces import FACES",
            "    import aiobootstrap.server.app",
            "    import json",
            "    class Later:",
            "        async def read(self):",
            "            from . import paths",
            "    return importlib.import_module('aiobootstrap.server.faces')",
        ]
    )
    assert _function_imports("aiobootstrap.server.openapi", source, "openapi/__init__.py") == [
        "openapi/__init__.py:4 imports aiobootstrap.server.faces inside a function",
        "openapi/__init__.py:5 imports aiobootstrap.server.app inside a function",
        "openapi/__init__.py:9 imports aiobootstrap.server.openapi inside a function",
        "openapi/__init__.py:10 imports import_module inside a function",
    ]
    lazy = "def __getattr__(name):\n    return importlib.import_module(name)\n"
    assert not _function_imports("aiobootstrap", lazy, "__init__.py")
    assert _function_imports("aiobootstrap.wire", lazy, "wire/__init__.py") == [
        "wire/__init__.py:2 imports import_module inside a function"
    ]


# -- the bench and the testbed import no test -------------------------------

TESTBED = TESTS.parent / "testbed"
"""Real servers the suite and the benchmarks both start (redis-server, Sentinel, etcd, Chromium)."""
BENCH = TESTS.parent / "bench"
OUTSIDE_THE_SUITE = {BENCH: ("tests",), TESTBED: ("tests", "bench")}
"""Folders beside the suite, and the top-level packages each must not import: what the bench and the suite
share is in the testbed, which imports neither."""


def _imports_of(path: Path, source: str, forbidden: tuple[str, ...]) -> list[str]:
    """Each import, at any depth, in ``source`` (the file ``path``) of a package of ``forbidden``."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.partition(".")[0] in forbidden]
    return [f"{path.relative_to(TESTS.parent)}:{line} imports {name}" for line, name in sorted(found)]


def test_the_bench_and_the_testbed_import_no_test() -> None:
    """The benchmarks run without the suite: the servers both start are the testbed's, not a test's."""
    offenders = [
        found
        for folder, forbidden in OUTSIDE_THE_SUITE.items()
        for path in sorted(folder.rglob("*.py"))
        for found in _imports_of(path, path.read_text(), forbidden)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_bench_check_names_each_import_of_the_suite() -> None:
    """The check is not vacuous: absolute imports of the suite, at any depth, are named with their line;
    the testbed, the package and relative imports pass."""
    source = "\n".join(
        [
            "from tests.redis_server import REDIS_SERVER",
            "import tests.helpers.etcd_server",
            "from testbed.chromium import missing",
            "from . import _report",
            "def later():",
            "    from tests import conftest",
            "from aiobootstrap import BootstrapClient",
        ]
    )
    assert _imports_of(BENCH / "example.py", source, ("tests",)) == [
        "bench/example.py:1 imports tests.redis_server",
        "bench/example.py:2 imports tests.helpers.etcd_server",
        "bench/example.py:6 imports tests",
    ]
    assert _imports_of(TESTBED / "x.py", "import bench._wrk", ("tests", "bench")) == [
        "testbed/x.py:1 imports bench._wrk"
    ]


# -- the registry is the only way to the records -----------------------------

REGISTRY_ROOMS = ("aiobootstrap.server", "aiobootstrap.cli")
"""Rooms that reach records only through the registry (``core/registry/__init__.py``), never its store."""

STORE_VALUES = frozenset(
    {
        # The store's value types and pure helpers: what a record is, not where it lives.
        "Key",
        "Record",
        "Change",
        "LeaseState",
        "HeldLease",
        "StoreLimits",
        "Target",
        "members_of",
        "with_member",
        "MEMBERS",
        "MAX_MEMBERS",
        "MAX_NAME_LENGTH",
        "ABSENT",
        "DEFAULT_ROLE",
        "TRANSFER_ENGINE_INFO",
        # A --store URL read, checked and shown; no store is opened by these.
        "check_store_url",
        "describe",
        "is_redis_url",
    }
)
"""What a room of REGISTRY_ROOMS may import from ``aiobootstrap.store``."""

STORE_REACHES = {
    ("aiobootstrap.server.app", "open_store"): "the start-up opens the registry's store, and closes it",
    ("aiobootstrap.server.config", "self.store"): "ServerConfig.store is the --store URL, a string",
    ("aiobootstrap.cli.parser", "args.store"): "the --store argument, a string",
}
"""The only reaches past the registry, and why: each names its module and what it reaches."""


def _in_store(module: str) -> bool:
    return module == "aiobootstrap.store" or module.startswith("aiobootstrap.store.")


def _store_reaches(module: str, source: str, where: str) -> list[str]:
    """Each place ``module`` touches the store past the registry: ``where:line`` and what."""
    package = module if where.endswith("__init__.py") else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _in_store(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            source_module = import_source(package, node)
            for alias in node.names:
                whole = f"{source_module}.{alias.name}"  # a module: ``from aiobootstrap import store``
                if whole in MODULES and _in_store(whole):
                    found.append((node.lineno, whole))
                elif _in_store(source_module) and alias.name not in STORE_VALUES:
                    found.append((node.lineno, alias.name))
        elif isinstance(node, ast.Attribute) and node.attr == "store" and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, ast.unparse(node)))
    return [
        f"{where}:{line} reaches the store: {what}"
        for line, what in sorted(found)
        if (module, what) not in STORE_REACHES
    ]


def test_the_server_and_the_cli_reach_records_only_through_the_registry() -> None:
    """No face, metric, host or tool imports a store or reads a ``.store``: the registry is the only way in."""
    offenders = [
        reach
        for module, path in MODULES.items()
        if any(module == room or module.startswith(room + ".") for room in REGISTRY_ROOMS)
        for reach in _store_reaches(module, path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert not offenders, "\n".join(offenders)


def test_the_test_import_check_names_each_test_module_and_conftest_imported() -> None:
    """The check is not vacuous: relative, absolute, nested and rootdir imports of a test module or of
    ``conftest`` are each named, with their line; helpers and aiohttp's ``test_utils`` are not."""
    source = "\n".join(
        [
            "from .test_cli import serve",
            "from . import page_browser, test_tools",
            "import tests.test_stores",
            "from tests.conftest import GUARD",
            "from .helpers.waits import until",
            "from aiohttp.test_utils import TestClient",
            "import test_metrics",
            "def later():",
            "    from .conftest import info_key",
        ]
    )
    assert _test_imports(TESTS / "test_example.py", source) == [
        "tests/test_example.py:1 imports tests.test_cli",
        "tests/test_example.py:2 imports tests.test_tools",
        "tests/test_example.py:3 imports tests.test_stores",
        "tests/test_example.py:4 imports tests.conftest",
        "tests/test_example.py:7 imports test_metrics",
        "tests/test_example.py:9 imports tests.conftest",
    ]
    assert _test_imports(
        TESTS / "helpers" / "example.py", "from ..conftest import GUARD\nfrom .waits import GUARD"
    ) == ["tests/helpers/example.py:1 imports tests.conftest"]


def test_the_registry_check_names_each_reach_past_it() -> None:
    """The check is not vacuous: a store imported (absolutely or relatively), a store module imported, and
    ``.store`` read are each named with their line; a value type passes, and an exception holds only in
    its own module."""
    source = [
        "import aiobootstrap.store.memory",
        "from aiobootstrap.store import Key, MemoryStore, Record",
        "from aiobootstrap.store.url import open_store",
        "from aiobootstrap import store",
        "async def handler(request):",
        "    return await request.app[REGISTRY].store.get(key)",
        "def host(self):",
        "    return self._registry.store",
    ]
    relative = [*source, "from ...store import LeaseState, Store", "from ...store.tables import LocalStore"]
    assert _store_reaches("aiobootstrap.server.faces.fake", "\n".join(relative), "fake.py") == [
        "fake.py:1 reaches the store: aiobootstrap.store.memory",
        "fake.py:2 reaches the store: MemoryStore",
        "fake.py:3 reaches the store: open_store",
        "fake.py:4 reaches the store: aiobootstrap.store",
        "fake.py:6 reaches the store: request.app[REGISTRY].store",
        "fake.py:8 reaches the store: self._registry.store",
        "fake.py:9 reaches the store: Store",
        "fake.py:10 reaches the store: LocalStore",
    ]
    # In the start-up, opening the store is the one reach allowed; the rest is named all the same.
    assert _store_reaches("aiobootstrap.server.app", "\n".join(source), "app.py") == [
        "app.py:1 reaches the store: aiobootstrap.store.memory",
        "app.py:2 reaches the store: MemoryStore",
        "app.py:4 reaches the store: aiobootstrap.store",
        "app.py:6 reaches the store: request.app[REGISTRY].store",
        "app.py:8 reaches the store: self._registry.store",
    ]
