"""effectively-once: CDK constructs for effectively-once SQS + Lambda processing."""
