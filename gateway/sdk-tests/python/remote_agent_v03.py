"""A small remote A2A v0.3 agent served by the official Python SDK of v0.3
(`a2a-sdk==0.3.26`: A2AStarletteApplication, DefaultRequestHandler).

The v0.3 twin of remote_agent.py (the v1.0 one): `a2a-gateway remote add`
reads its v0.3 card (`protocolVersion` 0.3.0, top-level `url`,
`preferredTransport` JSONRPC) and speaks v0.3 JSON-RPC to it
(`message/stream`, `tasks/get`, `tasks/cancel`), and the same local delegate
(gateway/examples/remote_delegate.rs) drives it. It behaves by the first
word of the user's text, as remote_agent.py does:

- `complete ...`: WORKING, a text artifact `echo: <text>`, then COMPLETED
  with an agent message `done: <text>`.
- `input ...`: asks for input once (input-required, `which one?`); a
  follow-up on the same task completes it with `got: <follow-up text>`.
- `slow ...`: WORKING until canceled (or 60 s), for the cancel check.
- `message ...`: a direct Message answer (`reply: <text>`), no task.
- `fail ...`: a task that goes FAILED with a message.

Usage: `python remote_agent_v03.py --port PORT [--name NAME] [--no-streaming]`.
Prints `READY <url>` once it listens, `EXEC <text>` per message it runs and
`CANCELED <task id>` per task canceled; exits on SIGTERM.
"""

import argparse
import asyncio

import uvicorn

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Part,
    TaskState,
    TextPart,
)
from a2a.utils import new_agent_text_message, new_task


def text_part(text: str) -> Part:
    return Part(root=TextPart(text=text))


class ScriptedExecutor(AgentExecutor):
    """Behaves by the first word of the user's text (see the module doc)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        print(f"EXEC {text}", flush=True)
        verb = text.split(" ", 1)[0].lower() if text else ""
        task = context.current_task

        if verb == "message" and task is None:
            await event_queue.enqueue_event(
                new_agent_text_message(f"reply: {text}", context_id=context.context_id)
            )
            return

        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        # A follow-up on a task that asked for input completes it.
        if task.status.state == TaskState.input_required:
            await updater.complete(updater.new_agent_message([text_part(f"got: {text}")]))
            return

        if verb == "input":
            await updater.requires_input(
                updater.new_agent_message([text_part("which one?")]), final=True
            )
        elif verb == "slow":
            await updater.start_work(updater.new_agent_message([text_part("working")]))
            # Cancel arrives as asyncio.CancelledError in this coroutine.
            await asyncio.sleep(60)
            await updater.complete()
        elif verb == "fail":
            await updater.failed(updater.new_agent_message([text_part(f"failed: {text}")]))
        else:
            await updater.start_work()
            await updater.add_artifact([text_part(f"echo: {text}")], name="echo")
            await updater.complete(updater.new_agent_message([text_part(f"done: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel(updater.new_agent_message([text_part("canceled")]))
        # The runner checks that a delegate's cancel reached this side.
        print(f"CANCELED {task.id}", flush=True)


RPC_PATH = "/a2a/jsonrpc"


def build_app(name: str, url: str, streaming: bool = True):
    # A v0.3 card as the SDK writes it: protocolVersion 0.3.0, `url` and
    # preferredTransport JSONRPC (the SDK's defaults), no supportedInterfaces.
    card = AgentCard(
        name=name,
        description="A scripted remote agent served by the a2a-sdk 0.3 (Python)",
        url=url,
        version="1.0.0",
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
        agent_executor=ScriptedExecutor(), task_store=InMemoryTaskStore()
    )
    return A2AStarletteApplication(agent_card=card, http_handler=handler).build(rpc_url=RPC_PATH)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="py-v03-remote")
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}{RPC_PATH}"
    app = build_app(args.name, url, streaming=not args.no_streaming)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            return
        await asyncio.sleep(0.05)
    print(f"READY http://127.0.0.1:{args.port}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
