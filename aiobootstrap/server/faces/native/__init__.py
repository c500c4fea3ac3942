"""aiobootstrap's own routes: ``/watch``, ``/leases``, the probes and listings (``status``), and the page."""
