"""The local AWS: moto's server and its patches (:mod:`.server`; :mod:`.moto_patches`, which applies those of
:mod:`.moto_sqs_cost`, :mod:`.moto_locking`, :mod:`.moto_deduplication`, :mod:`.fifo_order`, :mod:`.moto_powertools`,
:mod:`.moto_async_bridges`, :mod:`.moto_refusals`, :mod:`.moto_dynamodb_refusals` and
:mod:`.moto_sns_lambda_refusals`), Lambda's
asynchronous-invocation queue, the inbox contract between the bridges, the runner and the redrive
(:mod:`.async_inbox`), the deploy with the CDK CLI (:mod:`.deploy`), the one discovery of what a stack deployed
(:mod:`.discovery`, reading the stack beside its template with :mod:`.stack_template` and an asynchronous target's
sources with :mod:`.async_sources`; what a poller plays, :mod:`.mapping_config`), what a run reads back
(:mod:`.readback`), and the HTTP provider stand-in (:mod:`.provider_stand_in`)."""
