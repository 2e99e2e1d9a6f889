"""Code the Serve HTTP proxies run before a request reaches a deployment (the front door, the
bounded body read, API keys, strict JSON); the ingress reuses the body read, keys and JSON checks."""
