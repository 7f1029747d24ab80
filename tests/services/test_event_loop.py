"""Benchmarks, the simulator and the service all run on the loop uvicorn serves calls on."""

import asyncio

import uvloop

from lib import event_loop


def test_entry_points_run_on_uvloop_like_the_server():
    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert event_loop.uvicorn_loop() == "uvloop"
    assert event_loop.run(loop_type()) is uvloop.Loop
