"""The local AWS: moto's server and its patches (:mod:`.moto_patches`, :mod:`.server`), the deploy with the CDK CLI
(:mod:`.deploy`), discovery of what a stack deployed (:mod:`.discovery`), what a run reads back (:mod:`.readback`),
and the HTTP provider stand-in (:mod:`.provider_stand_in`)."""
