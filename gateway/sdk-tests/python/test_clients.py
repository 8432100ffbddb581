"""The official Python SDK (`a2a-sdk`) as an independent client of the gateway.

Drives a local agent that `a2a-gateway serve-tck` exposes (the TCK's system
under test: it behaves by the `messageId` prefix of the first message) with
the SDK's own client: card discovery, send, stream, get, subscribe, cancel,
list (with paging), and the errors a client must be able to read.

Usage: `python test_clients.py --url http://127.0.0.1:PORT [--binding B]`,
B the protocol binding the SDK is told to use (`JSONRPC`, the default, or
`HTTP+JSON`: the same checks over the REST binding, and every request the
SDK makes is checked to be on that binding's paths). Prints one line per
check and a closing `python-sdk (B): N passed, M failed`; exits non-zero if
any check failed.
"""

import argparse
import asyncio
import sys
import traceback
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

# Bounds every call and stream (they only stop a hang).
TIMEOUT = 30


def msg(prefix, text="hi", task_id=None, context_id=None):
    m = Message(
        role=Role.ROLE_USER,
        message_id=f"{prefix}-{uuid.uuid4().hex[:8]}",
        parts=[Part(text=text)],
    )
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


async def collect(aiter):
    out = []

    async def run():
        async for ev in aiter:
            out.append(ev)

    await asyncio.wait_for(run(), TIMEOUT)
    return out


def kinds(events):
    return [ev.WhichOneof("payload") for ev in events]


async def send_one(client, m):
    events = await collect(client.send_message(SendMessageRequest(message=m)))
    assert len(events) == 1, f"a unary send yields one response, got {kinds(events)}"
    return events[0]


# The path of each operation in the REST binding (under the interface URL).
REST_PATHS = ("/message:send", "/message:stream", "/tasks")


class Checks:
    def __init__(self, url, binding):
        self.url = url
        self.binding = binding
        self.unary = None
        self.streaming = None
        self.context = None
        self.http = None
        # The path of every request the SDK's clients made.
        self.paths = []

    async def setup(self):
        async def seen(request):
            self.paths.append(request.url.path)

        self.http = httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"request": [seen]})
        bindings = [self.binding]
        self.unary = await create_client(
            self.url, ClientConfig(streaming=False, httpx_client=self.http, supported_protocol_bindings=bindings)
        )
        self.streaming = await create_client(
            self.url, ClientConfig(streaming=True, httpx_client=self.http, supported_protocol_bindings=bindings)
        )

    async def close(self):
        for c in (self.unary, self.streaming):
            if c is not None:
                await c.close()
        if self.http is not None:
            await self.http.aclose()

    async def requests_use_the_binding(self):
        # Run last: every call above went over the binding asked for.
        calls = [p for p in self.paths if not p.endswith("/.well-known/agent-card.json")]
        assert calls, "no calls were seen"
        rest = [p for p in calls if any(seg in p for seg in REST_PATHS)]
        if self.binding == "HTTP+JSON":
            assert rest == calls, f"a call off the REST paths: {sorted(set(calls) - set(rest))}"
        else:
            assert not rest, f"a REST call in a JSON-RPC run: {rest}"

    async def card_is_v1(self):
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
        assert card.name, "the card has a name"
        assert card.capabilities.streaming, "the card declares streaming"
        # The v1.0 interfaces (a JSON-RPC one in v0.3 follows them).
        v1 = [i for i in card.supported_interfaces if i.protocol_version.startswith("1.")]
        bindings = [i.protocol_binding for i in v1]
        assert bindings == ["JSONRPC", "HTTP+JSON", "GRPC"], bindings
        others = [i.protocol_version for i in card.supported_interfaces if i not in v1]
        assert others == ["0.3"], others

    async def send_completes(self):
        ev = await send_one(self.unary, msg("tck-complete-task"))
        assert ev.HasField("task"), kinds([ev])
        task = ev.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
        assert task.id and task.context_id
        self.context = task.context_id
        got = await asyncio.wait_for(self.unary.get_task(GetTaskRequest(id=task.id, history_length=10)), TIMEOUT)
        assert got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED
        assert any(p.text == "hi" for m in got.history for p in m.parts), got.history

    async def send_returns_artifacts(self):
        ev = await send_one(self.unary, msg("tck-artifact-text"))
        arts = ev.task.artifacts
        assert len(arts) == 1 and arts[0].artifact_id, arts
        assert arts[0].parts[0].text == "Generated text content", arts
        ev = await send_one(self.unary, msg("tck-artifact-data"))
        data = ev.task.artifacts[0].parts[0].data
        assert data.struct_value["key"] == "value" and data.struct_value["count"] == 42, data

    async def message_response(self):
        ev = await send_one(self.unary, msg("tck-message-response"))
        assert ev.HasField("message"), kinds([ev])
        assert ev.message.role == Role.ROLE_AGENT
        assert ev.message.parts[0].text == "Direct message response", ev.message

    async def stream_ends_after_completion(self):
        events = await collect(self.streaming.send_message(SendMessageRequest(message=msg("tck-stream-001"))))
        k = kinds(events)
        assert k[0] == "task", k
        assert "artifact_update" in k, k
        arts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
        assert arts[0].parts[0].text == "Stream hello from TCK", arts
        last = events[-1]
        assert last.HasField("status_update"), k
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, last
        states = [e.status_update.status.state for e in events if e.HasField("status_update")]
        assert TaskState.TASK_STATE_WORKING in states, states

    async def subscribe_sees_the_follow_up(self):
        ev = await send_one(self.unary, msg("tck-input-required"))
        task = ev.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task.status
        events = []
        first = asyncio.Event()

        async def subscribe():
            async for e in self.streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                events.append(e)
                first.set()

        sub = asyncio.create_task(asyncio.wait_for(subscribe(), TIMEOUT))
        await asyncio.wait_for(first.wait(), TIMEOUT)
        assert events[0].HasField("task") and events[0].task.id == task.id, kinds(events)
        follow = await send_one(self.unary, msg("tck-complete-task", "done now", task_id=task.id))
        assert follow.task.status.state == TaskState.TASK_STATE_COMPLETED, follow.task.status
        await sub  # the stream closes after the terminal state
        last = events[-1]
        assert last.HasField("status_update"), kinds(events)
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, last

    async def cancel_an_interrupted_task(self):
        ev = await send_one(self.unary, msg("tck-input-required"))
        task = await asyncio.wait_for(self.unary.cancel_task(CancelTaskRequest(id=ev.task.id)), TIMEOUT)
        assert task.id == ev.task.id
        assert task.status.state == TaskState.TASK_STATE_CANCELED, task.status
        got = await asyncio.wait_for(self.unary.get_task(GetTaskRequest(id=task.id)), TIMEOUT)
        assert got.status.state == TaskState.TASK_STATE_CANCELED

    async def list_pages_a_context(self):
        ctx = f"sdk-py-{uuid.uuid4().hex[:8]}"
        ids = []
        for _ in range(3):
            ev = await send_one(self.unary, msg("tck-complete-task", context_id=ctx))
            assert ev.task.context_id == ctx, ev.task
            ids.append(ev.task.id)
        seen, token, pages = [], "", 0
        while True:
            page = await asyncio.wait_for(
                self.unary.list_tasks(ListTasksRequest(context_id=ctx, page_size=2, page_token=token)), TIMEOUT
            )
            pages += 1
            assert len(page.tasks) <= 2, len(page.tasks)
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token or pages > 5:
                break
        assert sorted(seen) == sorted(ids), (seen, ids)
        assert pages == 2, pages

    async def errors_are_typed(self):
        # The SDK maps the v1.0 error codes to its own exception types.
        try:
            await asyncio.wait_for(self.unary.get_task(GetTaskRequest(id="no-such-task")), TIMEOUT)
        except TaskNotFoundError:
            pass
        else:
            raise AssertionError("GetTask on an unknown id succeeded")
        ev = await send_one(self.unary, msg("tck-complete-task"))
        try:
            await asyncio.wait_for(self.unary.cancel_task(CancelTaskRequest(id=ev.task.id)), TIMEOUT)
        except TaskNotCancelableError:
            pass
        else:
            raise AssertionError("CancelTask on a completed task succeeded")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--binding", default="JSONRPC", choices=["JSONRPC", "HTTP+JSON"])
    args = parser.parse_args()
    checks = Checks(args.url, args.binding)
    who = f"python-sdk ({args.binding})"
    passed = failed = 0
    try:
        await asyncio.wait_for(checks.setup(), TIMEOUT)
    except Exception:
        traceback.print_exc()
        print(f"{who}: 0 passed, 1 failed")
        return 1
    for name in [
        "card_is_v1",
        "send_completes",
        "send_returns_artifacts",
        "message_response",
        "stream_ends_after_completion",
        "subscribe_sees_the_follow_up",
        "cancel_an_interrupted_task",
        "list_pages_a_context",
        "errors_are_typed",
        "requests_use_the_binding",
    ]:
        try:
            await getattr(checks, name)()
            passed += 1
            print(f"ok   {who} {name}")
        except Exception as e:
            failed += 1
            print(f"FAIL {who} {name}: {e!r}")
            traceback.print_exc()
    await checks.close()
    print(f"{who}: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
