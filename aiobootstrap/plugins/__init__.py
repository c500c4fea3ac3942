"""The engine plugins: aiobootstrap's servers in place of an unmodified engine's own (SPEC section 16).

SGLang and vLLM start their rendezvous servers inside their own processes and
load the general plugins that installed packages declare: SGLang the entry
point group ``sglang.srt.plugins`` (``load_plugins()``, whose ``HookRegistry``
replaces classes and functions), vLLM ``vllm.general_plugins``
(``load_general_plugins()``). aiobootstrap declares one of each
(``pyproject.toml``): ``sglang.register`` and ``vllm.register``.

This floor stands above the in-process servers (``server/threaded.py``,
``server/faces/<name>/inprocess.py``) and the command line, whose reading of
the environment it reuses; nothing of the package imports it.

- ``switch.py``: installed is not enabled. The engines call a plugin in every
  process; without ``AIOBOOTSTRAP_ENGINE=1`` or ``AIOBOOTSTRAP_STORE`` it
  returns having imported nothing of the server.
- ``settings.py``: the ``AIOBOOTSTRAP_*`` variables, read as ``serve``'s
  options into the one ``ServerConfig`` every server of the process runs on.
- ``dropins.py``: the classes put in the engines' place, made when the hook is
  installed: a subclass of the engine's own class whose constructor (the
  engine's signature) starts aiobootstrap's drop-in with that config; what the
  engine asks of the class (``issubclass``) it answers as the engine's did.
- ``sglang.py``, ``sglang_targets.py``; ``vllm.py``, ``vllm_targets.py``: each
  engine's callable and its targets, each named by its dotted path. A target
  the running version lacks is one ``WARNING`` naming it, and the engine's own
  server keeps running.
"""
