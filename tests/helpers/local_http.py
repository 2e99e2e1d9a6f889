"""A local aiohttp server for the benchmark clients' tests: the servers those clients measure
(ours, vLLM's, Ray Serve LLM's) are faked at the HTTP boundary."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve_posts(routes: dict[str, Handler]) -> tuple[web.AppRunner, str]:
    """POST `routes` served on a free local port: the runner (`cleanup()` it) and the base URL."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"
