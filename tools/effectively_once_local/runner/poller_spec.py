"""One poller process's whole brief (:class:`PollerSpec`): the deployed mapping or asynchronous target it plays
(``aws/mapping_config.py``), the run's folder, the handler's code, the local AWS's environment and the chaos it
strikes with; and the runner's opt-in request count (:data:`COUNT_REQUESTS_ENV`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..aws.mapping_config import MappingConfig
from ..chaos.fault_model import ChaosConfig

#: Opt-in (benchmarks): a folder; each poller then counts its AWS requests and invocations into it.
COUNT_REQUESTS_ENV = "EFFECTIVELY_ONCE_COUNT_REQUESTS"


@dataclass(frozen=True)
class PollerSpec:
    mapping: MappingConfig
    run_dir: str
    handler_root: str
    aws_env: dict[str, str]
    chaos: ChaosConfig = field(default_factory=ChaosConfig)
    #: Environment variables set in the poller after the function's own (a profile's switches, e.g. the payments
    #: control run's guards off). :default: none.
    env_overrides: dict[str, str] = field(default_factory=dict)
    #: ``module:function`` the poller calls as ``function(chaos, provider_log)`` before it imports the handler: a
    #: profile's seam around the side effect (the payments gateway, ``payments_view.install_gateway_seam``); the
    #: kills "after the effect" then strike there. :default: ``None``: at the runtime's effect line, for any handler.
    seam: str | None = None
    #: JMESPath over a message body giving its business key (booked with each kill: the keys of the killed batch).
    key_expression: str | None = None
    #: The business-identity steps applied to that key (``chaos_input.compile_key``). :default: none.
    key_normalize: tuple[str, ...] = ()
