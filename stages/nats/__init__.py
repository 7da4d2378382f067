"""Cluster scale-out on NATS JetStream (docs/cluster.md): a sink that publishes batches into per-device
subjects, a source that consumes them durably with acknowledgements, and the message format they share."""
