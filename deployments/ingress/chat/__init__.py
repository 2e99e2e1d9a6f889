"""The OpenAI-compatible chat API: POST /v1/chat/completions (parse, service, answers, errors,
routes, schemas, its OpenAPI entry and the `generation:` config)."""
