"""The compat suite: aiobootstrap beside the engines' released code (compat/engines.txt), run by `make compat`
in its own environment. aiobootstrap is the installed wheel here, never the checkout: the engines find its
plugins through its installed entry points, and the checks below make sure that is what runs."""

from __future__ import annotations

import pathlib

import pytest

import aiobootstrap

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]


def pytest_report_header() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("aiobootstrap", "sglang", "vllm", "torch"):
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} absent")
    return ["compat: " + ", ".join(found)]


@pytest.fixture(scope="session", autouse=True)
def installed_aiobootstrap() -> pathlib.Path:
    """The aiobootstrap under test is the installed one (run.sh installs it from the checkout on every run)."""
    where = pathlib.Path(aiobootstrap.__file__).resolve()
    assert CHECKOUT not in where.parents, (
        f"aiobootstrap is imported from the checkout ({where}), not installed: run the compat suite with "
        "`make compat` (compat/run.sh), from its environment"
    )
    return where
