"""Pure decision logic: no ray, torch, asyncio, clock or I/O. Runs in replicas and the simulator."""
