"""aiobootstrap's own routes: ``/watch``, ``/leases``, the health probe, and the page."""
