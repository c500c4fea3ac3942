"""Real servers that the suite and the benchmarks start and stop: redis-server, a Sentinel deployment,
etcd members, and how Debian's Chromium is launched. Neither ``tests/`` nor ``bench/`` imports the
other; what both need is here. The pytest fixtures over these are the suite's (``tests/redis_server.py``,
``tests/sentinel_cluster.py``, ``tests/helpers/etcd_server.py``)."""
