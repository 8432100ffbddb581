"""The official Python SDK's server (`a2a-sdk` 1.x, Starlette + uvicorn) with
an echo agent: the other side of `gateway/examples/sdk_bench.rs`
(BENCHMARKS.md, "Beside the official SDK").

The agent does the echo work the broker's `reply --exec cat` does: each
message becomes a task that completes with an agent message carrying the
user's text. The SDK's defaults otherwise (in-memory task store, one
uvicorn worker), as its own examples serve an agent. JSON-RPC is served at
`/a2a/jsonrpc` and HTTP+JSON at `/a2a/rest` at once, so one process answers
both bindings of a paired run.

Usage: `python bench_server.py --port PORT`. Prints `READY <url>` on stdout
once it listens and exits when its stdin closes (the harness keeps the pipe
open), so a harness that dies leaves nothing behind.
"""

import argparse
import asyncio
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)


class EchoExecutor(AgentExecutor):
    """Completes each task with the user's text, as `cat` would answer it."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.complete(updater.new_agent_message([new_text_part(text)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def build_app(origin: str) -> Starlette:
    card = AgentCard(
        name="echo",
        description="Echoes its input (the a2a-sdk side of sdk_bench)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{origin}/a2a/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            AgentInterface(
                url=f"{origin}/a2a/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card)
    routes += create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc")
    routes += create_rest_routes(handler, path_prefix="/a2a/rest")
    return Starlette(routes=routes)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    origin = f"http://127.0.0.1:{args.port}"
    config = uvicorn.Config(
        build_app(origin), host="127.0.0.1", port=args.port, log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            return
        await asyncio.sleep(0.05)
    print(f"READY {origin}", flush=True)
    stdin_closed = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await asyncio.wait(
        [serving, asyncio.ensure_future(stdin_closed)], return_when=asyncio.FIRST_COMPLETED
    )
    server.should_exit = True
    await serving


if __name__ == "__main__":
    asyncio.run(main())
