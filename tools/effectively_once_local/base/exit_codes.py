"""The exit codes of the local tooling's commands (docs/chaos.md): 0 passed; 1 a finding (lost, duplicated, ...);
2 a usage, deploy or local-AWS error, in one line (a wrong effect store or key path found after the run among
them: ``proof/stores.wrong_key_path``); 3 ``chaos --require-faults`` with a fault class asked for that
could strike and never did (``proof/faults_struck.py``); 4 the queues were not drained within the limit
(``engine/drain_limit.py``); 130 interrupted."""

from __future__ import annotations

EXIT_USAGE = 2
EXIT_FAULTS_NOT_STRUCK = 3
EXIT_NOT_DRAINED = 4
