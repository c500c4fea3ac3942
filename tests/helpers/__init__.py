"""What several test modules share that is not a fixture for every test: plain helpers, constants,
and the few fixtures a handful of modules import by name.

A test module imports from here (or from the helper modules beside ``conftest.py``), never from
another test module nor from ``conftest.py``, which holds the suite's fixtures and hooks only:
``tests/test_layout.py`` checks it.
"""
