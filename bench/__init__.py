"""The aiobootstrap benchmark suite: ``python -m bench`` (or ``make bench``).

Not part of the installed package; it needs the ``bench`` extra.
"""
