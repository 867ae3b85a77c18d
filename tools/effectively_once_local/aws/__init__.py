"""The local AWS: moto's server and its patches (:mod:`.moto_patches`, :mod:`.server`), the deploy with the CDK CLI
(:mod:`.deploy`), the one discovery of what a stack deployed (:mod:`.discovery`, reading the stack beside its template
with :mod:`.stack_template` and an asynchronous target's sources with :mod:`.async_sources`), what a run reads back
(:mod:`.readback`), and the HTTP provider stand-in (:mod:`.provider_stand_in`)."""
