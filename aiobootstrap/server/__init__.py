"""The server floor: the aiohttp app over the registry, and what hosts it.

It has three floors of its own, low to high (``tests/test_layout.py`` checks
them): the **host**, every module here but ``faces/`` and the in-process
servers (``app`` builds the application from the faces it is given or finds,
``face_registry``; the fast path, ``fastpath/``; the one front middleware,
errors, auth and scopes, body limits, metrics, the OpenAPI document,
connections, the socket, ``bind`` and ``server``; ``in_thread``, a server in
a thread), which imports no face and names no engine; the **faces**
(``faces/``: each engine's protocol a folder, declared as a ``face.Face``),
which import the host and what faces share, never another face; and the
**in-process servers** (``threaded.ThreadedBootstrapServer`` and each face's
drop-in, ``faces/<name>/inprocess.py``), built on ``in_thread``, which may
import both. Every use of aiohttp's private API is in ``aiohttp_internals``.
Nothing below this floor imports it, and the client never does.
"""
