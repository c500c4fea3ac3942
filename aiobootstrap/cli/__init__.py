"""The command line: ``python -m aiobootstrap`` (argv to config to a running server) and its tools.

The only reader of the environment. Importing it imports no aiohttp, so a
taken port is reported before the server's libraries load.
"""
