"""Pure decisions of the generation path (ModServe's stages): which images an encoder batch
takes, which requests' TTFT deadline is already lost. No ray, torch or asyncio: the encoder and
LLM replicas call these, and so will the simulator."""
