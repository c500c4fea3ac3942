"""Mooncake's metadata server: ``GET``/``PUT``/``DELETE /metadata?key=`` on the registry."""
