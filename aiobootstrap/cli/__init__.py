"""The command line: ``python -m aiobootstrap`` (argv to config to a running server) and its tools.

``main`` runs a command; ``parser`` reads argv and the environment (the only
reader of it) into a ``ServerConfig``; ``tool_parser`` holds the tools'
arguments and ``tools`` what they do; ``gc`` sets the collector for a server.
Importing it imports no aiohttp, so a taken port is reported before the
server's libraries load.
"""
