"""The public error tree: one module, every class exported, every class a BootstrapError."""

from __future__ import annotations

import inspect

import aiobootstrap
from aiobootstrap import exceptions
from aiobootstrap.wire import errors as wire_errors


def test_every_public_exception_lives_in_exceptions_and_is_exported() -> None:
    """Each exception aiobootstrap exports is defined in aiobootstrap.exceptions, and each defined there is exported."""
    exported = {
        name: getattr(aiobootstrap, name)
        for name in aiobootstrap.__all__
        if inspect.isclass(getattr(aiobootstrap, name)) and issubclass(getattr(aiobootstrap, name), Exception)
    }
    assert {cls.__module__ for cls in exported.values()} == {"aiobootstrap.exceptions"}
    defined = {
        name
        for name in exceptions.__all__
        if inspect.isclass(getattr(exceptions, name)) and issubclass(getattr(exceptions, name), Exception)
    }
    assert defined == set(exported)
    assert all(issubclass(cls, aiobootstrap.BootstrapError) for cls in exported.values())


def test_waiting_ends_in_one_of_two_distinct_errors() -> None:
    """ "Not registered until the timeout" and "no answer until the timeout" are different classes."""
    assert issubclass(aiobootstrap.RankNotRegistered, TimeoutError)
    assert not issubclass(aiobootstrap.RankNotRegistered, aiobootstrap.ServerUnavailable)
    assert not issubclass(aiobootstrap.ServerUnavailable, aiobootstrap.NotRegistered)
    assert not issubclass(aiobootstrap.UnexpectedReply, aiobootstrap.NotRegistered)


def test_the_shutdown_sentence_is_written_once() -> None:
    """ShuttingDown() says the server is shutting down without each raiser restating it."""
    assert aiobootstrap.ShuttingDown().detail == "The server is shutting down."


def test_a_403_is_forbidden_not_unauthorized() -> None:
    """A known token out of scope (403) is its own class: the token is right, the request is not."""
    error = exceptions.error_for_status(403, "This token may only read.")
    assert isinstance(error, aiobootstrap.Forbidden)
    assert not isinstance(error, aiobootstrap.Unauthorized)
    assert error.status == 403


def test_a_409_is_told_apart_by_its_code_both_ways() -> None:
    """The server writes a TopologyConflict's code beside its detail; the client reads the class back by it, and a
    409 without it (or a code under another status) by the status alone."""
    conflict = aiobootstrap.TopologyConflict("Its attn_tp_size 4 contradicts the topology's attn_tp_size 2.")
    assert wire_errors.error_fields(conflict) == {"code": "topology_conflict"}
    body = wire_errors.error_body(conflict.detail, **wire_errors.error_fields(conflict))
    decoded = wire_errors.decode_error(409, body)
    assert type(decoded) is aiobootstrap.TopologyConflict
    assert (decoded.detail, decoded.status) == (conflict.detail, 409)
    assert type(wire_errors.decode_error(409, wire_errors.error_body("full"))) is aiobootstrap.TooManyRanks
    assert type(exceptions.error_for_status(400, "x", "topology_conflict")) is aiobootstrap.BadRequest
    assert wire_errors.error_fields(aiobootstrap.LeaseNotFound("L1")) == {"lease": "L1"}
