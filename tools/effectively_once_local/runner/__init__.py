"""The local stand-ins for what Lambda runs: the SQS event source mapping, one process per execution environment,
chaos from outside (:mod:`.mapping_runner`), and Lambda's asynchronous-invocation queue, the inbox contract between the
local AWS's bridges, the runner and the redrive (:mod:`.async_inbox`)."""
