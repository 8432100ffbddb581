"""A small remote A2A v1.0 agent served by the official Python SDK (`a2a-sdk`).

The gateway's outbound tests add it by URL, so that a local delegate calls it
through the broker. Its behaviour is chosen by the first word of the user's
text, so that a test can ask for each path the gateway must translate:

- `complete ...`: a task that goes WORKING, gets a text artifact
  (`echo: <text>`), then COMPLETED with an agent message `done: <text>`.
- `input ...`: a task that asks for input (INPUT_REQUIRED); a follow-up on the
  same task completes it with `got: <follow-up text>`.
- `slow ...`: a task that goes WORKING and stays there (until canceled or
  60 s have passed), for cancel tests.
- `message ...`: a direct Message answer (`reply: <text>`), no task.
- `fail ...`: a task that goes FAILED with a message.

Usage: `python remote_agent.py --port PORT [--name NAME] [--watch-stdin]
[--no-streaming] [--binding JSONRPC|HTTP+JSON]`. It prints one line `READY <url>` on stdout once it listens,
and exits on SIGTERM, or with `--watch-stdin` when its stdin closes (so that a
parent that dies never leaves it behind). Each message it is sent prints
`EXEC <text>` (so a test counts how often a message ran), each task canceled
`CANCELED <task id>`. `--no-streaming` says so in the card, so that the
gateway forwards with unary `SendMessage` calls. `--binding HTTP+JSON`
serves the SDK's REST routes (under `/a2a/rest`) instead of JSON-RPC, and
the card offers that interface alone.
"""

import argparse
import asyncio
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_message, new_text_part
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


class ScriptedExecutor(AgentExecutor):
    """Behaves by the first word of the user's text (see the module doc)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        print(f"EXEC {text}", flush=True)
        verb = text.split(" ", 1)[0].lower() if text else ""
        task = context.current_task

        if verb == "message" and task is None:
            await event_queue.enqueue_event(
                new_text_message(f"reply: {text}", context_id=context.context_id)
            )
            return

        if task is None:
            task = new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        # A follow-up on a task that asked for input completes it.
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.complete(updater.new_agent_message([new_text_part(f"got: {text}")]))
            return

        if verb == "input":
            await updater.requires_input(
                updater.new_agent_message([new_text_part("which one?")])
            )
        elif verb == "slow":
            await updater.start_work(updater.new_agent_message([new_text_part("working")]))
            # Cancel arrives as asyncio.CancelledError in this coroutine.
            await asyncio.sleep(60)
            await updater.complete()
        elif verb == "fail":
            await updater.failed(updater.new_agent_message([new_text_part(f"failed: {text}")]))
        else:
            await updater.start_work()
            await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
            await updater.complete(updater.new_agent_message([new_text_part(f"done: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("canceled")]))
        # The runner checks that a delegate's cancel reached this side.
        print(f"CANCELED {task.id}", flush=True)


# Where each binding is served.
PATHS = {"JSONRPC": "/a2a/jsonrpc", "HTTP+JSON": "/a2a/rest"}


def build_app(name: str, url: str, streaming: bool = True, binding: str = "JSONRPC") -> Starlette:
    card = AgentCard(
        name=name,
        description="A scripted remote agent served by the a2a-sdk (Python)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Echoes its input as an artifact",
                tags=["echo", "test"],
            )
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = create_agent_card_routes(card, cache_control="public, max-age=60")
    if binding == "HTTP+JSON":
        routes += create_rest_routes(handler, path_prefix=PATHS[binding])
    else:
        routes += create_jsonrpc_routes(handler, rpc_url=PATHS[binding])
    return Starlette(routes=routes)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="py-remote")
    parser.add_argument("--watch-stdin", action="store_true")
    parser.add_argument("--no-streaming", action="store_true")
    parser.add_argument("--binding", default="JSONRPC", choices=sorted(PATHS))
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}{PATHS[args.binding]}"
    app = build_app(args.name, url, streaming=not args.no_streaming, binding=args.binding)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            return
        await asyncio.sleep(0.05)
    print(f"READY http://127.0.0.1:{args.port}", flush=True)

    if not args.watch_stdin:
        await serving
        return
    # Stop when the parent's pipe closes: a crashed parent leaves nothing behind.
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    await asyncio.wait(
        [serving, asyncio.ensure_future(stdin_closed)], return_when=asyncio.FIRST_COMPLETED
    )
    server.should_exit = True
    await serving


if __name__ == "__main__":
    asyncio.run(main())
