"""The ``IdempotencyTable`` behind ``IdempotencyTable.from_table_name`` / ``from_table_arn``."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from . import limits
from .idempotency_table import IdempotencyTable


class ImportedIdempotencyTable(IdempotencyTable):
    """An ``IdempotencyTable`` that imports its table instead of creating one.

    :param import_table: called with this construct as scope; returns the imported table (child ``Resource``).
    """

    def __init__(self, scope: Construct, id: str, import_table: Callable[[Construct], dynamodb.ITable]) -> None:
        # Skips IdempotencyTable.__init__, which creates a table; the rest of the class works on ``self.table``.
        Construct.__init__(self, scope, id)
        self.table = import_table(self)
        # The shape an imported table must have (class docstring): Powertools' TTL attribute.
        self.time_to_live_attribute = limits.IDEMPOTENCY_TTL_ATTRIBUTE
