"""Sample payment Lambda: the payment domain (model, gateway, record function) on ``effectively_once_runtime``,
which brings SQS batches (standard or FIFO), direct invocation and the effectively-once guarantees.

Runtime code only: nothing here imports the CDK side (house rule 4).
"""
