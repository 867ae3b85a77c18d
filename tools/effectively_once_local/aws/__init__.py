"""The local AWS: moto's server and its patches (:mod:`.server`; :mod:`.moto_patches`, which applies those of
:mod:`.moto_sqs_cost`, :mod:`.moto_locking`, :mod:`.moto_deduplication`, :mod:`.fifo_order`, :mod:`.moto_powertools`
and :mod:`.moto_async_bridges`), the deploy with the CDK CLI (:mod:`.deploy`), the one discovery of what a stack
deployed (:mod:`.discovery`, reading the stack beside its template with :mod:`.stack_template` and an asynchronous
target's sources with :mod:`.async_sources`), what a run reads back (:mod:`.readback`), and the HTTP provider stand-in
(:mod:`.provider_stand_in`)."""
