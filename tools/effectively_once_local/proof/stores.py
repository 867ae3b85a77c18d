"""Effects counted from the stores themselves: ``--effect KIND:NAME:KEYPATH``, repeatable, one per store the run
names. Log lines are a cross-check, never the only witness.

Kinds:

- ``table:NAME:ATTRIBUTE``: a DynamoDB table of the stack (its logical id, physical name, or a part of the logical
  id naming one table); one item per effect, the business key in ``ATTRIBUTE``.
- ``bucket:NAME:TEMPLATE``: an S3 bucket of the stack; one object per effect, its key matching ``TEMPLATE`` with
  ``{key}`` where the business key stands (``receipts/{key}.json``) or ``{effect_key}`` where the runtime's scoped
  effect key stands (``<key prefix>#<effect>#<key>``), and ``*`` for any characters (``receipts/{key}/*``). The
  placeholder is matched against the business keys the run sent, never against any characters
  (``proof/object_names.py``; a template that can match a name two ways for the input is refused before the run).
- ``queue:NAME:JMESPATH``: an SQS queue of the stack (or an SNS topic's subscribed queue); one message per effect,
  the business key the JMESPath over its body (strict JSON). The queue is read without consuming it.
- ``provider:PATH:JMESPATH``: the HTTP provider stand-in the run starts (``aws/provider_stand_in.py``); one executed
  call per effect, the business key the JMESPath over the call's JSON body. ``PATH`` is empty (every call) or a path
  prefix starting with ``/`` (only the calls whose path starts with it: ``provider:/v1/charges:amount.order_id``).
- ``sqlite:FILE:TABLE:COLUMN``: a table of a SQLite database file (read-only; a file or table not there yet holds
  nothing); one row per effect, the business key in ``COLUMN``.
- ``postgres:DSN:TABLE:COLUMN``: the same in PostgreSQL (``DSN``: a libpq connection string or URI; psycopg 3 is
  imported only for such a store). ``TABLE`` is ``name`` or ``schema.name``.

SQL rows are identified by their values (a row is written by a commit no write log sees, ``chaos/faults.py``, so each
row counts as an effect of its own: an app that inserts one row per key under a fresh id shows its duplicates).

Every store is required by default: a key whose effect shows in some of the run's required stores and not in the
others at the end is ``incomplete`` (:func:`incomplete_keys`), a failing state that wins over ``invalid``. A store
written at most once, or only under a condition, is marked optional with a ``:optional`` suffix
(``provider:/unkeyed/at-most-once/:order_id:optional``): counted, never required.

Only what the run added counts: each store is read before the first message is sent (:func:`snapshot`) and what
was there then is left out, so several runs can share one deploy.

A store that holds what the run added, none of it under a key the run knows, while the run's effect lines name the
keys it sent, is probably the wrong store or read under the wrong key path (a wrong ``--effect-key``): the run says so
in one line and exits 2 (:func:`wrong_key_path`, :class:`EffectStoreError`), rather than report every key lost. An
app that wrote nothing leaves the store as it was: its keys are lost (exit 1).

An effect is an execution's writes, not an item: each item is tied to the execution that first wrote it, from the
write log (``chaos/faults.py``: every accepted write names what it wrote), so an execution that writes two items for a
key (an order row and its audit row) is one effect, and "duplicated" means more than one execution's writes for a key.
An item no write log names (a provider call, a write from outside the run's functions) counts as an effect of its
own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path
from typing import Any

from effectively_once_runtime.identity import normalizer

from .executions import Counted, Writer, count_effects
from .store_kinds import OPTIONAL_SUFFIX, PROVIDER_LOG, STORE_KINDS, EffectStore, Item, kind_of, physical_name

__all__ = [
    "PROVIDER_LOG",
    "EffectStore",
    "EffectStoreError",
    "Store",
    "combine",
    "incomplete_keys",
    "parse_effect",
    "physical_name",
    "wrong_key_path",
]

#: Every kind's ``KIND`` (``proof/store_kinds.py``: one class each).
KINDS = tuple(STORE_KINDS)
#: The most field names :func:`wrong_key_path` lists.
_FIELDS_SHOWN = 12


class EffectStoreError(ValueError):
    """A store the run names is probably not where its effects are, or is read under the wrong key path
    (:func:`wrong_key_path`): a usage error (one line, exit 2), not a finding of the app."""


def parse_effect(text: str) -> EffectStore:
    """``KIND:NAME:KEYPATH`` (the module docstring); for the SQL kinds ``KIND:TARGET:TABLE:COLUMN``, kept as
    ``name`` ``TARGET:TABLE`` and ``key_path`` ``COLUMN``.

    :raises ValueError: another kind, a missing part, a provider name that is not a path, a template without
        exactly one ``{key}`` or ``{effect_key}``, a JMESPath the runtime does not accept, or a SQL table or column
        that is not a plain identifier.
    """
    if text.endswith(OPTIONAL_SUFFIX) and text.count(":") > 2:
        return replace(parse_effect(text.removesuffix(OPTIONAL_SUFFIX)), optional=True)
    kind, sep, rest = text.partition(":")
    if not sep or kind not in STORE_KINDS:
        raise ValueError(f"{text!r} is not KIND:NAME:KEYPATH with KIND one of {', '.join(KINDS)}")
    return STORE_KINDS[kind].parse(text, rest)


class Store:
    """One named store, resolved in the deployed stack: ``snapshot()`` before the run, ``count()`` after it.
    ``keys``: the business keys the run sent, which a bucket's object-name template is matched against
    (``object_names.matcher``; none: any characters)."""

    def __init__(
        self,
        session: Any,
        stack: str,
        store: EffectStore,
        run_dir: Path,
        normalize: tuple[str, ...] = (),
        *,
        keys: Iterable[str] = (),
    ) -> None:
        self.spec = store
        self.keys = frozenset(keys)
        self.normalize = normalize
        self.session = session
        self.run_dir = run_dir
        #: The store's kind (``proof/store_kinds.py``), which reads it.
        self.kind = kind_of(store)
        #: The store's name in the write logs: the physical name of a store of the stack, ``""`` for the provider,
        #: ``TARGET:TABLE`` for SQL (``StoreKind.log_name``).
        self.name = self.kind.log_name(session, stack, store)
        #: What identifies its items in the write logs (a table's key attributes), else ``[]``.
        self.key_attributes: list[str] = self.kind.key_attributes(session, self.name)
        self._before: set[str] = set()
        #: What :meth:`count` found: the effects per key and what it learned (``proof/executions.py``).
        self.counted = Counted(Counter())
        #: Each item the run added, as the write logs name it (``(store name, identity)``), and its business key.
        self.item_keys: dict[tuple[str, str], str] = {}
        #: Every item the run added, its key normalised (``None``: none under the key path), as :meth:`count` found.
        self.added: list[Item] = []

    def _items(self) -> list[Item]:
        """Every item in the store now (its kind's ``items``)."""
        return self.kind.items(self)

    def snapshot(self) -> None:
        """What the store holds before the run: left out of :meth:`count`."""
        self._before = {item.identity for item in self._items()}

    def count(
        self,
        writers: Mapping[tuple[str, str], Writer] | None = None,
        batches: Mapping[str, Counter[str]] | None = None,
    ) -> Counter[str]:
        """Effects per business key that the run added (an item without the key is left out), each key normalised
        as the run's input is (``--normalize``), counted by ``proof/executions.py`` from the writes that made its
        items (``writers``: :func:`~.executions.writers`; an item not in it counts alone) and the invocations'
        batches (``batches``: :func:`~.executions.batches`). What the count learned stays in :attr:`counted`."""
        same = normalizer(self.normalize)
        self.added = [
            item._replace(key=same(item.key) if item.key else None)
            for item in self._items()
            if item.identity not in self._before
        ]
        added = [(item.identity, item.key) for item in self.added if item.key is not None]
        self.item_keys = {(self.name, identity): key for identity, key in added}
        self.counted = count_effects(added, self.name, writers, batches)
        return self.counted.effects


def wrong_key_path(store: Store, logged: Mapping[str, int], sent: AbstractSet[str]) -> str | None:
    """Why ``store`` (counted: :meth:`Store.count`) is probably the wrong store or read under the wrong key path, in
    one line without the flag that named it; ``None`` when nothing says so. Said when the run's effect lines name keys
    it sent (``logged``: effect lines per key, normalised as the run's keys are; ``sent``: the input's keys) and the
    store holds items the run added, none with a key (under its key path) that was sent or logged. An app that wrote
    nothing leaves the store as it was (its keys are lost: a finding), and a run whose effect lines name no key it sent
    (an app keyed on something else) says nothing about the store: ``None`` for both."""
    lines = sum(n for key, n in logged.items() if key in sent)
    known = set(sent) | set(logged)
    if not lines or not store.added or any(item.key in known for item in store.added):
        return None
    item, path, fields_word = store.kind.words
    fields = sorted({field for it in store.added for field in it.fields})
    listed = ", ".join(fields[:_FIELDS_SHOWN]) + (" ..." if len(fields) > _FIELDS_SHOWN else "")
    example = min(store.added, key=lambda it: it.identity).shown
    shape = f"; its {item}s have {fields_word} {listed} (one {item}: {example})" if fields_word and fields else ""
    found = f"holds {len(store.added)} new {item}s, none with {path} {store.spec.key_path!r}"
    return f"the effect store {store.name or store.spec.kind} {found} matching a key of the {lines} effect lines" + (
        shape or f"; one {item}: {example}"
    )


def incomplete_keys(counts: Mapping[str, Counter[str]], optional: set[str], keys: set[str]) -> list[str]:
    """The ``keys`` whose effect shows in some of the required stores and not in all of them (``counts``: effects
    per key by store, :meth:`Store.count`; ``optional``: the stores not required). Fewer than two required stores:
    none."""
    required = [c for name, c in counts.items() if name not in optional]
    if len(required) < 2:
        return []
    return sorted(k for k in keys if 0 < sum(1 for c in required if c[k] > 0) < len(required))


def combine(counts: dict[str, Counter[str]]) -> tuple[Counter[str], dict[str, Any]]:
    """Effects per key across the stores (a key's most effects in any one store: one effect that writes to two
    stores is one effect) and, per store, its effects and the keys it shows more than once (naming the store of
    each duplicate)."""
    combined: Counter[str] = Counter()
    for counter in counts.values():
        for key, n in counter.items():
            combined[key] = max(combined[key], n)
    per_store = {
        name: {"effects": sum(c.values()), "duplicated": sorted(k for k, n in c.items() if n > 1)[:100]}
        for name, c in counts.items()
    }
    return combined, per_store
