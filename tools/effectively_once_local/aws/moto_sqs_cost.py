"""moto's SQS backend's cost: two small fixes for the local tooling, on moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`. Applied by :func:`.moto_patches.apply` (the local AWS's server), whose
module docstring lists every patch and the module that holds it.

Bridged (moto 5.2.x): ``Queue.attributes`` computes every attribute, the three ``ApproximateNumberOf*`` counts
each scanning all messages, and moto reads it (a) once per message returned by ``ReceiveMessage`` (to check the
retention period) and (b) several times per message sent to a FIFO queue (to read
``ContentBasedDeduplication``). With a thousand messages queued that is quadratic, and sends and receives slow
to seconds. Fix (a) reads the retention period directly; fix (b) makes ``attributes`` a mapping that computes
each value when it is read. What the API answers is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any


class _LazyAttributes(Mapping[str, Any]):
    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._getters: dict[str, Callable[[], Any]] = {}
        from moto.core.utils import camelcase_to_underscores

        for name in names:
            self._getters[name] = partial(getattr, queue, camelcase_to_underscores(name))
        if queue.policy:
            self._getters["Policy"] = lambda: queue.policy
        if queue.redrive_policy:
            import json

            self._getters["RedrivePolicy"] = lambda: json.dumps(queue.redrive_policy)

    def __getitem__(self, key: str) -> Any:
        value = self._getters[key]()
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._getters)

    def __len__(self) -> int:
        return len(self._getters)


def lazy_queue_attributes() -> None:
    """moto 5.2.5: ``Queue.attributes`` builds every attribute on each read, the three ``ApproximateNumberOf*``
    counts each scanning all of the queue's messages, and every ``SendMessage`` reads it (``ContentBasedDeduplication``;
    a FIFO send four times): a send costs O(queue depth), filling a queue is quadratic. The patch makes it a mapping
    that computes a value only when it is read (:class:`_LazyAttributes`); what the API answers is unchanged.
    docs/moto-bugs.md, report 1; test: ``test_a_send_does_not_count_the_queue``."""
    from moto.sqs import models

    def attributes(self: Any) -> Mapping[str, Any]:
        return _LazyAttributes(self)

    models.Queue.attributes = property(attributes)  # type: ignore[assignment,method-assign]


def direct_retention_check() -> None:
    """moto 5.2.5: ``ReceiveMessage`` checks each message it returns against the retention period through
    ``get_queue_attributes``, every attribute (and so every count of the queue) once per message returned. The patch
    reads the queue's ``message_retention_period`` directly; the check itself is moto's. docs/moto-bugs.md, report 1;
    test: ``test_a_receive_does_not_count_the_queue``."""
    from moto.core.utils import unix_time
    from moto.sqs import models

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.get_queue(queue_name)
        return bool(int(queue.message_retention_period) + message.sent_timestamp / 1000 > unix_time())

    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
