"""The package's version, in a leaf module: the server, the CLI and the OpenAPI document read it
without importing the package root (``pyproject.toml`` reads it here too)."""

__version__ = "0.1.0"
