"""The engine every run goes through: the one pipeline (:mod:`.pipeline`: a local AWS and the deploy, the mappings
discovered, one poller pool, the producer's sends, the drain) and how long a run waits for its queues to drain
(:mod:`.drain_limit`). The profiles above it (``any_stack/``, ``payments/``) each read back and check what happened;
it knows none of them."""
