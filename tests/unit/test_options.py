"""The option objects (``ProcessingQueueOptions``, ``IdempotentQueueConsumerOptions``): each field has the name,
the default and the documented default of the construct's own prop; frozen and keyword-only."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from effectively_once import (
    IdempotentQueueConsumer,
    IdempotentQueueConsumerOptions,
    ProcessingQueue,
    ProcessingQueueOptions,
)
from effectively_once.options import given_fields

#: option object -> the construct whose props it carries
MIRRORS = {ProcessingQueueOptions: ProcessingQueue, IdempotentQueueConsumerOptions: IdempotentQueueConsumer}
OPTIONS = sorted(MIRRORS, key=lambda cls: cls.__name__)


def _documented_fields(cls: type) -> set[str]:
    """The fields whose ``:param name:`` in the class docstring has a ``:default:``."""
    doc = inspect.getdoc(cls) or ""
    params = re.split(r"^:param ", doc, flags=re.M)[1:]
    return {param.split(":", 1)[0] for param in params if ":default:" in param}


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda cls: cls.__name__)
def test_every_field_default_equals_the_construct_default(cls: type) -> None:
    construct = inspect.signature(MIRRORS[cls].__init__).parameters
    fields = {field.name: field.default for field in dataclasses.fields(cls)}

    assert {name: construct[name].default for name in fields} == fields


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda cls: cls.__name__)
def test_every_field_is_a_keyword_only_prop_of_the_construct(cls: type) -> None:
    construct = inspect.signature(MIRRORS[cls].__init__).parameters
    fields = [field.name for field in dataclasses.fields(cls)]

    assert {name: construct[name].kind for name in fields if name in construct} == dict.fromkeys(
        fields, inspect.Parameter.KEYWORD_ONLY
    )


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda cls: cls.__name__)
def test_every_field_documents_its_default(cls: type) -> None:
    assert _documented_fields(cls) == {field.name for field in dataclasses.fields(cls)}


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda cls: cls.__name__)
def test_signature_shows_the_fields(cls: type) -> None:
    parameters = inspect.signature(cls).parameters

    assert list(parameters) == [field.name for field in dataclasses.fields(cls)]
    assert {p.kind for p in parameters.values()} == {inspect.Parameter.KEYWORD_ONLY}


def test_fails_positional_arguments() -> None:
    with pytest.raises(TypeError):
        ProcessingQueueOptions(True)  # type: ignore[misc]


def test_fails_changing_a_field() -> None:
    options = ProcessingQueueOptions(fifo=True)

    with pytest.raises(dataclasses.FrozenInstanceError):
        options.fifo = False  # type: ignore[misc]


def test_remembers_the_fields_given_even_at_their_default() -> None:
    options = IdempotentQueueConsumerOptions(batch_size=10, alarms=False)

    assert given_fields(options) == {"batch_size", "alarms"}
    assert options == IdempotentQueueConsumerOptions(alarms=False)
