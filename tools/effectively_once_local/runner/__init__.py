"""The local stand-ins for what Lambda runs: the SQS event source mapping, one process per execution environment,
chaos from outside (:mod:`.mapping_runner`, the pool of pollers and the runner's front, with :mod:`.mapping_config`,
:mod:`.batch_poller`, :mod:`.async_poller`, :mod:`.execution_environment` and :mod:`.request_counter`), and Lambda's
asynchronous-invocation queue, the inbox contract between the local AWS's bridges, the runner and the redrive
(:mod:`.async_inbox`)."""
