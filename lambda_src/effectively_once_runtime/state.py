"""One execution environment's state (``ConsumerState``), built on first use: the settings read from the
environment, the persistence layer and Powertools' idempotency config around the record function, the dead-letter
queue and the marker table un-keyed effects use.

Powertools configures a persistence layer once (its key JMESPath is fixed by the first ``configure``), so a layer
shared by two consumers would key the second on the first's key, silently: each layer serves one owner
(``own``, ``release``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from botocore.config import Config

from .backoff import Backoff, sqs_clients
from .claims import guard_claims
from .dead_letter import DeadLetterQueue
from .effect_results import guard_releases
from .effects._context import MarkerTable
from .legacy_hashes import accept_legacy_validation
from .on_failure import OnFailureQueue
from .operations import mark_operation
from .settings import RuntimeSettings, refuse_shared_process

#: Builds the persistence layer from the settings: ``(table_name=..., boto_config=...)`` like
#: ``DynamoDBPersistenceLayer`` (the default) or a subclass of it.
PersistenceLayerFactory = Callable[..., BasePersistenceLayer]

#: Which owner a persistence layer serves, and that owner's key prefix.
_LAYER_OWNERS: weakref.WeakKeyDictionary[BasePersistenceLayer, tuple[object, str]] = weakref.WeakKeyDictionary()


@dataclass
class ConsumerState:
    """One execution environment's state, built on first use (cold start): settings, persistence layer,
    idempotency config, the idempotent record function, the dead-letter queue (``None`` without
    ``DEAD_LETTER_QUEUE_URL``; its SQS client is built on its first send), the marker table of un-keyed effects
    (the idempotency table, with the layer's client and key layout when it is Powertools' DynamoDB layer) and the
    on-failure queue (``None`` without ``ON_FAILURE_QUEUE_URL``) and the per-record backoff (``None`` without
    ``SOURCE_QUEUES``)."""

    settings: RuntimeSettings
    persistence_store: BasePersistenceLayer
    config: IdempotencyConfig
    process: Callable[..., Any]
    dead_letter: DeadLetterQueue | None = None
    markers: MarkerTable | None = None
    on_failure: OnFailureQueue | None = None
    backoff: Backoff | None = None


@dataclass(frozen=True)
class StateSpec:
    """What a ``Consumer`` builds its state from.

    :ivar key_prefix: the prefix when ``IDEMPOTENCY_KEY_PREFIX`` is unset or empty.
    :ivar powertools_key: the key JMESPath Powertools searches and hashes.
    :ivar validate: the payload validation JMESPath, or ``None``.
    :ivar raise_on_no_idempotency_key: Powertools' switch of the same name.
    :ivar functions: the JMESPath functions of both expressions.
    :ivar persistence_layer: builds the layer when none is given.
    :ivar legacy_validate: the ``validate`` expression as given, whose hash before 0.4.0 is still accepted
        (``legacy_hashes.accept_legacy_validation``), or ``None``.
    :ivar operation: ``Consumer(operation=...)``, stored with each record (``operations.mark_operation``), or ``None``.
    """

    key_prefix: str
    powertools_key: str
    validate: str | None
    raise_on_no_idempotency_key: bool
    functions: Any
    persistence_layer: PersistenceLayerFactory = DynamoDBPersistenceLayer
    legacy_validate: Any = None
    operation: str | None = None


def build_state(
    spec: StateSpec,
    owner: object,
    record_function: Callable[..., Any],
    on_duplicate: Callable[..., Any],
    *,
    persistence_store: BasePersistenceLayer | None = None,
    env: Mapping[str, str] | None = None,
) -> ConsumerState:
    """The state for ``owner``: ``record_function`` made idempotent, ``on_duplicate`` as Powertools' response hook.

    :raises ValueError: the environment is incomplete or malformed (``RuntimeSettings.from_env``),
        ``DEAD_LETTER_QUEUE_URL`` or ``ON_FAILURE_QUEUE_URL`` is not a queue URL, or the persistence layer already
        serves another owner.
    :raises ConcurrencyModeRefused: ``AWS_LAMBDA_CONCURRENCY_MODE`` runs requests side by side in this process
        (``settings.refuse_shared_process``).
    """
    refuse_shared_process(env)
    settings = RuntimeSettings.from_env(default_key_prefix=spec.key_prefix, env=env)
    url = settings.dead_letter_queue_url
    dead_letter = DeadLetterQueue(url) if url else None
    logger = getattr(owner, "logger", None) or Logger()
    persistence_store = _layer(spec, settings, owner, logger, persistence_store)
    config = IdempotencyConfig(
        event_key_jmespath=spec.powertools_key,
        payload_validation_jmespath=spec.validate or "",
        raise_on_no_idempotency_key=spec.raise_on_no_idempotency_key,
        expires_after_seconds=settings.expiry_seconds,
        # The functions the key was checked against at construction (and Powertools' own default), plus the
        # normalising one when ``normalize`` is on.
        jmespath_options={"custom_functions": spec.functions},
        response_hook=on_duplicate,
    )
    process = idempotent_function(
        data_keyword_argument="record",
        persistence_store=persistence_store,
        config=config,
        key_prefix=settings.key_prefix,
    )(record_function)
    markers = marker_table(settings, persistence_store)
    on_failure_url = settings.on_failure_queue_url
    on_failure = OnFailureQueue(on_failure_url, direct=settings.on_failure_direct) if on_failure_url else None
    backoff = None
    if settings.source_queues:
        backoff = Backoff(settings.source_queues, sqs_clients(), logger, getattr(owner, "metrics", None))
        backoff.warm()  # its clients now (the init phase with Consumer.warm), not on a batch's time
    return ConsumerState(settings, persistence_store, config, process, dead_letter, markers, on_failure, backoff)


def _layer(
    spec: StateSpec,
    settings: RuntimeSettings,
    owner: object,
    logger: Logger,
    given: BasePersistenceLayer | None,
) -> BasePersistenceLayer:
    """The persistence layer: ``given``, or built by ``spec.persistence_layer``; owned by ``owner``, its refused
    claims read by ``claims.guard_claims``, its records released with their effects' results
    (``effect_results.guard_releases``), its records marked with the consumer's operation (``operations``) and its
    legacy validation hashes accepted (``legacy_hashes``)."""
    store = given
    if store is None:
        # The table may live in another Region than the function (the constructs pass its ARN, which DynamoDB
        # takes as TableName): a request goes to the client's own Region, so build the client in the table's.
        region = settings.table_region
        store = spec.persistence_layer(
            table_name=settings.table_name, boto_config=Config(region_name=region) if region else None
        )
    own(store, owner, settings.key_prefix)
    guard_claims(store, logger=logger, expiry_seconds=settings.expiry_seconds)
    guard_releases(store, logger)
    mark_operation(store, spec.operation)  # inside the legacy acceptance, which wraps it
    accept_legacy_validation(store, spec.legacy_validate, logger)
    return store


def marker_table(settings: RuntimeSettings, store: BasePersistenceLayer) -> MarkerTable:
    """The idempotency table as the marker table: the layer's table, client and key layout when it is Powertools'
    DynamoDB layer, else the table of the settings (its client built on first use)."""
    if isinstance(store, DynamoDBPersistenceLayer):
        return MarkerTable(
            store.table_name,
            settings.key_prefix,
            store.client,
            settings.expiry_seconds,
            key_attr=store.key_attr,
            expiry_attr=store.expiry_attr,
            sort_key_attr=store.sort_key_attr,
            static_pk_value=store.static_pk_value,
        )
    return MarkerTable(settings.table_name, settings.key_prefix, None, settings.expiry_seconds)


def own(store: BasePersistenceLayer, owner: object, prefix: str) -> None:
    """Make ``owner`` (with the key prefix ``prefix``) the one owner of ``store``.

    :raises ValueError: another owner has it (the message names both key prefixes).
    """
    held = _LAYER_OWNERS.get(store)
    if held is not None and held[0] is not owner:
        raise ValueError(
            f"persistence layer {type(store).__name__} already serves the Consumer with key prefix {held[1]!r}; "
            f"the Consumer with key prefix {prefix!r} needs its own (Powertools configures a layer once: a "
            "shared one keys every consumer on the first one's key)"
        )
    _LAYER_OWNERS[store] = (owner, prefix)


def release(store: BasePersistenceLayer, owner: object) -> None:
    """Free ``store`` when ``owner`` has it."""
    held = _LAYER_OWNERS.get(store)
    if held is not None and held[0] is owner:
        del _LAYER_OWNERS[store]
