"""The local stand-ins for what Lambda runs: the SQS event source mapping, one process per execution environment,
chaos from outside (:mod:`.mapping_runner`, the pool of pollers and the runner's front, with :mod:`.poller_spec`,
:mod:`.batch_poller`, :mod:`.async_poller`, :mod:`.execution_environment` and :mod:`.request_counter`), and Lambda's
asynchronous invocation, played from the function's inbox (``aws/async_inbox.py``).

``effectively_once_local.runner.async_inbox`` and ``.mapping_config`` were modules of this folder before they moved
into ``aws/``: their old paths still import, with a ``DeprecationWarning`` (``effectively_once_local._moved``)."""
