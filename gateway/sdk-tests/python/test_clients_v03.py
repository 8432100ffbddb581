"""The official Python SDK of A2A v0.3 (`a2a-sdk==0.3.26`) as a client of the gateway.

Most deployed A2A clients still speak v0.3: `message/send`, `kind`
discriminators, lowercase states, the v0.3 card (`url`,
`preferredTransport`). This drives a local agent that `a2a-gateway
serve-tck` exposes (the TCK's system under test: it behaves by the
`messageId` prefix of the first message) with the v0.3 SDK's own client, a
whole delegation: card discovery, send, input-required and its follow-up,
artifacts of each part kind, a message answer, a non-blocking send polled to
its end, streams and resubscription with `final`, cancel, push config CRUD,
the card as the client reads it, and the v0.3 error codes.

Usage: `python test_clients_v03.py --url http://127.0.0.1:PORT` (with the
v0.3 SDK installed: run.sh makes a venv of its own for it). Prints one line
per check and a closing `python-sdk-v0.3: N passed, M failed`; exits
non-zero if any check failed.
"""

import argparse
import asyncio
import sys
import traceback
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)

# Bounds every call and stream (they only stop a hang).
TIMEOUT = 30


def msg(prefix, text="hi", task_id=None, context_id=None):
    return Message(
        role=Role.user,
        message_id=f"{prefix}-{uuid.uuid4().hex[:8]}",
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


async def collect(aiter):
    out = []

    async def run():
        async for ev in aiter:
            out.append(ev)

    await asyncio.wait_for(run(), TIMEOUT)
    return out


async def send_one(client, m, configuration=None):
    """A unary send: the task (or the message) it answers."""
    events = await collect(client.send_message(m, configuration=configuration))
    assert len(events) == 1, f"a unary send yields one response, got {events}"
    ev = events[0]
    if isinstance(ev, Message):
        return ev
    task, update = ev
    assert update is None, update
    return task


async def expect_code(coro, code):
    try:
        await asyncio.wait_for(coro, TIMEOUT)
    except A2AClientJSONRPCError as e:
        assert e.error.code == code, e.error
    else:
        raise AssertionError(f"expected error {code}, the call succeeded")


class Checks:
    def __init__(self, url):
        self.url = url
        self.unary = None
        self.streaming = None

    async def setup(self):
        self.unary = await ClientFactory.connect(self.url, ClientConfig(streaming=False))
        self.streaming = await ClientFactory.connect(self.url, ClientConfig(streaming=True))

    async def close(self):
        for c in (self.unary, self.streaming):
            if c is not None:
                await c.close()

    async def card_is_v03(self):
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
        assert card.protocol_version == "0.3.0", card.protocol_version
        assert card.url.startswith(self.url) and "/agents/" in card.url, card.url
        assert card.preferred_transport == "JSONRPC", card.preferred_transport
        assert card.capabilities.streaming, card.capabilities
        assert card.skills and card.skills[0].id, card.skills
        # serve-tck asks for no authentication: no authenticated extended card.
        assert not card.supports_authenticated_extended_card, card

    async def send_completes(self):
        task = await send_one(self.unary, msg("tck-complete-task"))
        assert isinstance(task, Task), task
        assert task.status.state == TaskState.completed, task.status
        got = await asyncio.wait_for(self.unary.get_task(TaskQueryParams(id=task.id, history_length=10)), TIMEOUT)
        assert got.id == task.id and got.status.state == TaskState.completed, got.status
        assert got.history and got.history[0].role == Role.user, got.history
        assert any(
            isinstance(p.root, TextPart) and p.root.text == "hi" for m in got.history for p in m.parts
        ), got.history

    async def input_required_then_follow_up(self):
        task = await send_one(self.unary, msg("tck-input-required"))
        assert task.status.state == TaskState.input_required, task.status
        assert task.status.message.role == Role.agent, task.status.message
        follow = await send_one(
            self.unary, msg("tck-complete-task", "more", task_id=task.id, context_id=task.context_id)
        )
        assert follow.id == task.id, (follow.id, task.id)
        assert follow.status.state == TaskState.completed, follow.status

    async def artifacts_of_each_part_kind(self):
        task = await send_one(self.unary, msg("tck-artifact-text"))
        p = task.artifacts[0].parts[0].root
        assert isinstance(p, TextPart) and p.text == "Generated text content", p
        task = await send_one(self.unary, msg("tck-artifact-data"))
        p = task.artifacts[0].parts[0].root
        assert isinstance(p, DataPart) and p.data == {"key": "value", "count": 42}, p
        task = await send_one(self.unary, msg("tck-artifact-file-url"))
        p = task.artifacts[0].parts[0].root
        assert isinstance(p, FilePart) and isinstance(p.file, FileWithUri), p
        assert p.file.uri == "https://example.com/output.txt", p
        task = await send_one(self.unary, msg("tck-artifact-file"))
        p = task.artifacts[0].parts[0].root
        assert isinstance(p, FilePart) and isinstance(p.file, FileWithBytes), p
        assert p.file.bytes == "ZmlsZSBjb250ZW50IGZyb20gVENL", p

    async def message_response(self):
        m = await send_one(self.unary, msg("tck-message-response"))
        assert isinstance(m, Message), m
        assert m.role == Role.agent
        assert m.parts[0].root.text == "Direct message response", m

    async def non_blocking_send_is_polled_to_its_end(self):
        # v0.3's `blocking: false` (v1.0's returnImmediately).
        task = await send_one(
            self.unary, msg("tck-complete-task"), configuration=MessageSendConfiguration(blocking=False)
        )
        assert isinstance(task, Task), task
        for _ in range(100):
            if task.status.state == TaskState.completed:
                break
            await asyncio.sleep(0.1)
            task = await asyncio.wait_for(self.unary.get_task(TaskQueryParams(id=task.id)), TIMEOUT)
        assert task.status.state == TaskState.completed, task.status

    async def stream_ends_after_completion(self):
        events = await collect(self.streaming.send_message(msg("tck-stream-001")))
        updates = [u for _, u in events if u is not None]
        arts = [u for u in updates if isinstance(u, TaskArtifactUpdateEvent)]
        assert arts and arts[0].artifact.parts[0].root.text == "Stream hello from TCK", updates
        statuses = [u for u in updates if isinstance(u, TaskStatusUpdateEvent)]
        assert TaskState.working in [s.status.state for s in statuses], statuses
        last = events[-1][1]
        assert isinstance(last, TaskStatusUpdateEvent), last
        assert last.status.state == TaskState.completed and last.final, last
        assert not any(s.final for s in statuses[:-1]), statuses
        # The SDK's own task tracker saw the whole task.
        task = events[-1][0]
        assert task.status.state == TaskState.completed and task.artifacts, task

    async def resubscribe_sees_the_follow_up(self):
        task = await send_one(self.unary, msg("tck-input-required"))
        assert task.status.state == TaskState.input_required, task.status
        events = []
        first = asyncio.Event()

        async def resubscribe():
            async for ev in self.streaming.resubscribe(TaskIdParams(id=task.id)):
                events.append(ev)
                first.set()

        sub = asyncio.create_task(asyncio.wait_for(resubscribe(), TIMEOUT))
        await asyncio.wait_for(first.wait(), TIMEOUT)
        assert events[0][0].id == task.id, events
        follow = await send_one(self.unary, msg("tck-complete-task", "done now", task_id=task.id))
        assert follow.status.state == TaskState.completed, follow.status
        await sub  # the stream closes after the terminal state
        last = events[-1][1]
        assert isinstance(last, TaskStatusUpdateEvent), events
        assert last.status.state == TaskState.completed and last.final, last

    async def cancel_an_interrupted_task(self):
        task = await send_one(self.unary, msg("tck-input-required"))
        canceled = await asyncio.wait_for(self.unary.cancel_task(TaskIdParams(id=task.id)), TIMEOUT)
        assert canceled.id == task.id
        assert canceled.status.state == TaskState.canceled, canceled.status
        got = await asyncio.wait_for(self.unary.get_task(TaskQueryParams(id=task.id)), TIMEOUT)
        assert got.status.state == TaskState.canceled, got.status

    async def push_config_set_and_get(self):
        task = await send_one(self.unary, msg("tck-input-required"))
        cfg = TaskPushNotificationConfig(
            task_id=task.id,
            push_notification_config=PushNotificationConfig(
                id="v03-hook", url="http://127.0.0.1:9/webhook", token="tok"
            ),
        )
        stored = await asyncio.wait_for(self.unary.set_task_callback(cfg), TIMEOUT)
        assert stored.task_id == task.id, stored
        assert stored.push_notification_config.id == "v03-hook", stored
        assert stored.push_notification_config.url == "http://127.0.0.1:9/webhook", stored
        got = await asyncio.wait_for(
            self.unary.get_task_callback(
                GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id="v03-hook")
            ),
            TIMEOUT,
        )
        assert got == stored, (got, stored)
        await asyncio.wait_for(self.unary.cancel_task(TaskIdParams(id=task.id)), TIMEOUT)

    async def get_card(self):
        card = await asyncio.wait_for(self.unary.get_card(), TIMEOUT)
        assert card.protocol_version == "0.3.0" and card.name, card

    async def errors_have_v03_codes(self):
        await expect_code(self.unary.get_task(TaskQueryParams(id="no-such-task")), -32001)
        task = await send_one(self.unary, msg("tck-complete-task"))
        await expect_code(self.unary.cancel_task(TaskIdParams(id=task.id)), -32002)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    checks = Checks(args.url)
    passed = failed = 0
    try:
        await asyncio.wait_for(checks.setup(), TIMEOUT)
    except Exception:
        traceback.print_exc()
        print("python-sdk-v0.3: 0 passed, 1 failed")
        return 1
    for name in [
        "card_is_v03",
        "send_completes",
        "input_required_then_follow_up",
        "artifacts_of_each_part_kind",
        "message_response",
        "non_blocking_send_is_polled_to_its_end",
        "stream_ends_after_completion",
        "resubscribe_sees_the_follow_up",
        "cancel_an_interrupted_task",
        "push_config_set_and_get",
        "get_card",
        "errors_have_v03_codes",
    ]:
        try:
            await getattr(checks, name)()
            passed += 1
            print(f"ok   python-sdk-v0.3 {name}")
        except Exception as e:
            failed += 1
            print(f"FAIL python-sdk-v0.3 {name}: {e!r}")
            traceback.print_exc()
    await checks.close()
    print(f"python-sdk-v0.3: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
