"""moto's server with two small fixes for its SQS backend's cost, for the local runner only.

Bridged (moto 5.2.x): ``Queue.attributes`` computes every attribute, the three ``ApproximateNumberOf*`` counts
each scanning all messages, and moto reads it (a) once per message returned by ``ReceiveMessage`` (to check the
retention period) and (b) several times per message sent to a FIFO queue (to read
``ContentBasedDeduplication``). With a thousand messages queued that is quadratic, and sends and receives slow
to seconds. Fix (a) reads the retention period directly; fix (b) makes ``attributes`` a mapping that computes
each value when it is read. What the API answers is unchanged.

Run as ``python -m effectively_once.local._moto_server -H 127.0.0.1 -p PORT`` (the arguments of ``moto_server``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any, Callable


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


def apply() -> None:
    from moto.core.utils import unix_time
    from moto.sqs import models

    def attributes(self: Any) -> Mapping[str, Any]:
        return _LazyAttributes(self)

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.get_queue(queue_name)
        return int(queue.message_retention_period) + message.sent_timestamp / 1000 > unix_time()

    models.Queue.attributes = property(attributes)  # type: ignore[assignment,method-assign]
    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]


if __name__ == "__main__":
    apply()
    from moto.server import main

    main()
