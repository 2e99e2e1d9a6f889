"""The classify API: POST /v1/classify and /v1/jobs (request service, schemas, the catalog of
served variants, admission, coalescing of calls to one family)."""
