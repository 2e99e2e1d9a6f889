"""Token-throughput autoscaling in Serve (docs/autoscaling.md): the policies Serve's controller
runs (serve_hooks.py over decisions.py, the arithmetic in policies/autoscaling/), what replicas
report (reporting.py), the `autoscaling:` config (config.py), and where the decisions are shown
(ledger.py -> view.py: /v1/status, /metrics)."""
