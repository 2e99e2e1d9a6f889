"""The vision-language generation path (ModServe's stages): image encoder and LLM deployments,
the monolith, their token-aware routers and the chat service the ingress runs."""
