"""The payments profile, the one part of the tooling that knows the payments sample (``lambda_src/payments``): the
demo and soak on the engine (:mod:`.demo`, ``make demo``, ``make soak``), with the payments view of the sandbox stack
(:mod:`.payments_view`), the payments file and its routes (:mod:`.payments_input`), the payments report
(:mod:`.payments_report`), the outage backlog and its redrive (:mod:`.backlog`) and the asynchronous leg
(:mod:`.async_leg`); and the ``produce`` and ``report`` commands against a stack in a real account (:mod:`.remote`)."""
