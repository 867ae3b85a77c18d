"""The chaos proof for any stack, the ``chaos`` command's job on the engine (``engine/pipeline.py``): the run
(:mod:`.chaos_run`: ``run_chaos(ChaosOptions(...))``), how it reaches its targets (:mod:`.chaos_targets`: senders,
failure queues read back and moved back) and the faults that cannot strike on the stack, refused or left out before
the first send (:mod:`.inert_faults`). It redrives with the ``redrive`` command's code (``redrive/``) and knows
nothing of the payments sample."""
