"""How a tool fails: its exit statuses, and the error a tool explains in one line."""

from __future__ import annotations

__all__ = ["EXIT_ABSENT", "EXIT_SERVER", "EXIT_USAGE", "ToolError"]

EXIT_ABSENT = 1
"""The rank(s) were not registered when the time ran out."""
EXIT_USAGE = 2
"""A bad argument or file, or a request the server refused (400, 401, 403)."""
EXIT_SERVER = 3
"""The server could not be reached, or failed."""


class ToolError(Exception):
    """A failure the tool explains in one line."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status
