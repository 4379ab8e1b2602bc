"""The metrics adapters: the Prometheus Pushgateway."""
