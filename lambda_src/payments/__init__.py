"""Sample payment Lambda: SQS batch (standard or FIFO) or direct invocation, charged effectively once.

Runtime code only: nothing here imports the CDK side (house rule 4).
"""
