"""Faces are found, not listed: the folders of ``server/faces/`` and other packages' entry points
(``aiobootstrap.faces``), selected with ``--faces`` (``ServerConfig.faces``).

A face from another package is written here into a scratch directory, as a
module and a ``*.dist-info`` whose ``entry_points.txt`` names it, put on
``PYTHONPATH`` and served by a real ``python -m aiobootstrap`` with its own
option and its own environment variable; no module of the package names it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server import face_registry
from aiobootstrap.server.face_registry import face_names, installed_faces, installed_settings, select
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.server.faces.prefill.settings import PrefillSettings

from .helpers.cli import Served, serve
from .helpers.waits import GUARD

FACES_FOLDER = Path(face_registry.__file__).parent / "faces"
BUILT_IN = tuple(sorted(path.parent.name for path in FACES_FOLDER.glob("*/face.py")))
"""The faces the package ships: every folder of server/faces/ with a face.py, read from the disk here (a new
face's folder is one more, and no line of this test names it)."""

TOY_MODULE = '''
"""A face of another package: GET /toy says its greeting (--toy-greeting, or $TOY_GREETING)."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from aiobootstrap.server.appkeys import CONFIG
from aiobootstrap.server.face import Access, Face, Route


@dataclasses.dataclass(frozen=True, slots=True)
class ToySettings:
    toy_greeting: str = "hello"

    def __post_init__(self) -> None:
        if not self.toy_greeting:
            raise ValueError("toy greeting must not be empty")

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--toy-greeting", default=None, metavar="TEXT",
                            help=f"what GET /toy says (or set TOY_GREETING; default: {cls().toy_greeting})")

    @classmethod
    def from_arguments(cls, args, environ):
        given = args.toy_greeting if args.toy_greeting is not None else environ.get("TOY_GREETING")
        return cls() if given is None else cls(given)


async def toy(request: web.Request) -> web.Response:
    return web.Response(text=request.app[CONFIG].settings_of(ToySettings).toy_greeting)


def paths():
    ok = {"description": "The greeting.", "content": {"text/plain": {"schema": {"type": "string"}}}}
    return {"/toy": {"get": {"operationId": "toy", "summary": "Say the greeting.", "responses": {"200": ok}}}}


FACE = Face.of_routes(
    "toy", lambda: [Route("GET", "/toy", toy, Access.READ)], paths=paths, settings=ToySettings, order=50
)
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch directory holding the toy face's module and the metadata that names it as an entry point."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "toy_face.py").write_text(TOY_MODULE)
    info = root / "toy_face-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-face\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[aiobootstrap.faces]\ntoy = toy_face:FACE\n")
    return root


def _environ(plugin: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture
def served_with(plugin: Path) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for server in started:
        server.process.terminate()
        server.process.communicate(timeout=GUARD)


def _get(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, method=method), timeout=GUARD) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_a_face_from_another_package_is_served_with_its_option(
    plugin: Path, served_with: list[Served]
) -> None:
    """Its route (and its namespace twin) answers, its option and variable set it, --help lists the option,
    /openapi.json and every built-in face are still there."""
    served = serve("--log-level", "warning", env=_environ(plugin, TOY_GREETING="hi there"))
    served_with.append(served)
    assert _get(served.url + "/toy") == (200, "hi there")
    assert _get(served.url + "/ns/team-a/toy") == (200, "hi there")
    assert _get(served.url + "/health") == (200, "OK")
    assert "/toy" in json.loads(_get(served.url + "/openapi.json")[1])["paths"]
    assert _get(served.url + "/list_encoder_urls")[0] == 200
    other = serve("--log-level", "warning", "--toy-greeting", "howdy", env=_environ(plugin, TOY_GREETING="x"))
    served_with.append(other)
    assert _get(other.url + "/toy") == (200, "howdy")  # the option wins over its variable
    shown = subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "--help"],
        capture_output=True, text=True, timeout=GUARD, env=_environ(plugin), check=True,
    )  # fmt: skip
    help_text = " ".join(shown.stdout.split())
    assert "--toy-greeting TEXT what GET /toy says (or set TOY_GREETING; default: hello)" in help_text
    assert "every one installed: " + ", ".join(sorted((*BUILT_IN, "toy"))) in help_text


def test_faces_selects_the_other_packages_face(plugin: Path, served_with: list[Served]) -> None:
    """--faces toy,native: the toy's route and the native ones, none of the engines'."""
    served = serve("--log-level", "warning", "--faces", "toy,native", env=_environ(plugin))
    served_with.append(served)
    assert _get(served.url + "/toy") == (200, "hello")
    assert _get(served.url + "/health") == (200, "OK")
    assert _get(served.url + "/metadata?key=k")[0] == 404
    assert _get(served.url + "/list_encoder_urls")[0] == 404
    assert "/toy" in json.loads(_get(served.url + "/openapi.json")[1])["paths"]


def test_faces_mooncake_and_native_serve_metadata_and_not_route(served_with: list[Served]) -> None:
    """--faces mooncake,native: Mooncake's /metadata is served, the prefill face's /route is not."""
    served = serve("--log-level", "warning", "--faces", "mooncake,native")
    served_with.append(served)
    assert _get(served.url + "/metadata?key=mooncake/ram/a", "PUT", b'{"segment": 1}') == (
        200,
        "metadata updated",
    )
    assert _get(served.url + "/metadata?key=mooncake/ram/a") == (200, '{"segment": 1}')
    assert _get(served.url + "/route")[0] == 404
    assert _get(served.url + "/route?engine_rank=0&target_dp_group=0&target_pp_rank=0")[0] == 404
    assert _get(served.url + "/health") == (200, "OK")
    paths = json.loads(_get(served.url + "/openapi.json")[1])["paths"]
    assert "/metadata" in paths
    assert "/route" not in paths


@pytest.mark.parametrize(
    ("faces", "message"),
    [
        ("bogus,native", "argument --faces: no face is named 'bogus': the faces are " + ", ".join(BUILT_IN)),
        ("native,native", "faces must name each face once, not native, native"),
    ],
)
def test_an_unknown_or_repeated_face_is_one_line_and_status_2(faces: str, message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "--port", "0", "--faces", faces],
        capture_output=True, text=True, timeout=GUARD, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert message in result.stderr


# -- the registry, in this process ----------------------------------------------


def test_the_installed_faces_are_the_folders_in_their_declared_order() -> None:
    """Every folder of server/faces/ with a face.py, named by its folder, served in Face.order."""
    assert face_names() == BUILT_IN
    assert {"encoders", "engine_info", "mooncake", "native", "prefill"} <= set(BUILT_IN)
    faces = installed_faces()
    assert [face.name for face in faces] == [
        face.name for face in sorted(faces, key=lambda f: (f.order, f.name))
    ]
    assert [face.name for face in faces][:3] == [
        "engine_info",
        "encoders",
        "prefill",
    ]  # their declared orders
    assert faces[-1].name == "native"  # 1000: its routes after every engine's


def test_a_folders_settings_are_read_without_its_face_and_are_its_faces() -> None:
    """The command line reads each folder's settings.py (SETTINGS) without loading the face (its options are
    parsed before aiohttp loads, so a taken port is reported at once): the same class as the face declares."""
    declared = {face.settings for face in installed_faces() if face.settings is not None}
    assert set(installed_settings()) == declared
    probe = (
        "import sys; from aiobootstrap.cli.parser import server_config, server_parser; "
        "server_config(server_parser().parse_args(['--dp-room-ttl', '5']), {}); print('aiohttp' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=GUARD, check=True
    )
    assert result.stdout.strip() == "False"


def test_select_keeps_the_order_and_names_the_known_faces() -> None:
    faces = installed_faces()
    assert [face.name for face in select(faces, ("native", "mooncake"))] == ["mooncake", "native"]
    # The native face (Face.always) is served whatever --faces names: the health probe, /watch, leases, page.
    assert [face.name for face in select(faces, ("mooncake",))] == ["mooncake", "native"]
    assert select(faces, None) == faces
    with pytest.raises(ValueError, match="no face is named 'nope': the faces are encoders, engine_info"):
        select(faces, ("nope",))
    with pytest.raises(ValueError, match="no face is named 'mooncake': the faces are native"):
        create_app(ServerConfig(faces=("mooncake",)), faces=[face for face in faces if face.name == "native"])


def test_the_config_holds_each_faces_settings_once_and_defaults_otherwise() -> None:
    """settings_of gives the instance given, else the class's defaults; defaults are not kept, so configs
    that serve alike compare equal; a class given twice is refused."""
    rooms = PrefillSettings(dp_room_ttl=5)
    config = ServerConfig(settings=(rooms, EncoderSettings()))
    assert config.settings_of(PrefillSettings) is rooms
    assert config.settings_of(EncoderSettings) == EncoderSettings()
    assert config.settings == (rooms,)
    assert ServerConfig(settings=(EncoderSettings(),)) == ServerConfig()
    assert config.with_settings(PrefillSettings(dp_room_ttl=6)).settings_of(PrefillSettings).dp_room_ttl == 6
    with pytest.raises(ValueError, match="settings of PrefillSettings are given twice"):
        ServerConfig(settings=(rooms, PrefillSettings()))
    with pytest.raises(ValueError, match="faces must name at least one face"):
        ServerConfig(faces=())


def test_two_faces_of_one_name_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry point named as a folder's face does not hide it: the registry refuses both, naming them."""
    point = importlib.metadata.EntryPoint("native", "elsewhere:FACE", face_registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [point])
    face_registry._found.cache_clear()
    try:
        with pytest.raises(ValueError, match="two installed faces are named 'native'"):
            face_names()
    finally:
        monkeypatch.undo()
        face_registry._found.cache_clear()


def test_a_face_whose_entry_point_fails_to_import_is_one_line_naming_it(tmp_path: Path) -> None:
    """Another package's face that cannot be imported (a bug, a dependency missing) stops the server with one
    line naming the face and its entry point, not a traceback nor advice to reinstall aiobootstrap."""
    info = tmp_path / "broken_face-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-face\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[aiobootstrap.faces]\nbroken = no_such_module_for_a_face:FACE\n")
    result = subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "--port", "0"],
        capture_output=True, text=True, timeout=GUARD, check=False, env=_environ(tmp_path),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "the face 'broken' (aiobootstrap.faces entry point no_such_module_for_a_face:FACE)" in (
        result.stderr
    )
    assert "failed to load: ModuleNotFoundError" in result.stderr
    assert "pip install aiobootstrap" not in result.stderr


def test_a_folder_is_a_face_by_its_face_py_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A face is a folder with a face.py: found without an __init__.py too (Python imports such a folder), and
    its FACE served; a folder without face.py, and __pycache__, are no faces."""
    package = tmp_path / "scratch_faces_pkg"
    (package / "toy").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "toy" / "face.py").write_text(TOY_MODULE)  # no __init__.py beside it
    (package / "shared").mkdir()
    (package / "shared" / "__init__.py").write_text("")  # a package the faces share: no face.py
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "face.cpython-311.pyc").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(face_registry, "FACES_PACKAGE", "scratch_faces_pkg")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    face_registry._found.cache_clear()
    try:
        assert face_names() == ("toy",)
        assert [face_registry._load(found).name for found in face_registry._found()] == ["toy"]
    finally:
        monkeypatch.undo()
        face_registry._found.cache_clear()


def test_the_faces_list_embedders_extended_is_still_there() -> None:
    """``create_app(faces=(*FACES, yours))`` (docs/embedding.md before the faces were found) still serves the
    installed faces and one more: ``FACES`` is the installed faces, in their order, naming none of them."""
    from aiobootstrap.server.faces import FACES

    assert installed_faces() == FACES
    assert sorted(face.name for face in FACES) == list(BUILT_IN)
    create_app(faces=(*FACES,))
