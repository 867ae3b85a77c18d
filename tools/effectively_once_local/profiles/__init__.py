"""What a run is for, each on the one pipeline (:mod:`.pipeline`): the chaos run for any stack (:mod:`.chaos_run`),
the payments demo and soak (:mod:`.demo`, with the payments view :mod:`.payments_view`, input
:mod:`.payments_input` and report :mod:`.payments_report`, the outage :mod:`.backlog` and the :mod:`.async_leg`), the
redrive of deployed stacks (:mod:`.redrive`) and the commands against a real account (:mod:`.remote`)."""
