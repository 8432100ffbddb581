"""The official Python SDK (`a2a-sdk`) across restarts of `a2a-gateway serve`.

run.sh runs this in three roles around a gateway it stops (SIGTERM, then
SIGKILL) and starts again on the same state file:

- `webhook --port P --out FILE`: a push receiver that outlives the
  gateway; each POST body is appended to FILE as one line.
- `before --url URL --hook HOOK --out STATE`: tasks in every state the
  TCK agent and the sink give (completed, input-required, rejected,
  canceled, submitted), push configs on the open ones; everything a client
  reads afterwards (GetTask of each, ListTasks with and without a context,
  the push getters) saved to STATE.
- `after --url URL --in STATE --hook-file FILE`: the restarted gateway
  answers every one of those reads exactly as before; SubscribeToTask of
  the input-required task, then a follow-up, completes it on the stream;
  CancelTask of the submitted one cancels it; the webhook hears both
  terminal states.

Prints one line per check and a closing `python-sdk-restart: N passed, M
failed`; exits non-zero if any check failed.
"""

import argparse
import asyncio
import http.server
import json
import sys
import time
import traceback
import uuid

from google.protobuf.json_format import MessageToDict

from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

# Bounds every call and stream (they only stop a hang).
TIMEOUT = 30


def msg(prefix, text="hi", task_id=None, context_id=None):
    m = Message(role=Role.ROLE_USER, message_id=f"{prefix}-{uuid.uuid4().hex[:8]}", parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


async def send_task(client, m, return_immediately=False):
    req = SendMessageRequest(message=m)
    if return_immediately:
        req.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    out = []

    async def run():
        async for ev in client.send_message(req):
            out.append(ev)

    await asyncio.wait_for(run(), TIMEOUT)
    assert len(out) == 1 and out[0].HasField("task"), out
    return out[0].task


async def call(coro):
    return await asyncio.wait_for(coro, TIMEOUT)


async def clients(url):
    return (
        await create_client(url, ClientConfig(streaming=False)),
        await create_client(f"{url}/agents/sink", ClientConfig(streaming=False)),
        await create_client(url, ClientConfig(streaming=True)),
    )


async def reads(tck, sink, saved):
    """Everything a client reads of the saved tasks, as plain JSON."""
    out = {"get": {}, "lists": {}, "push": {}}
    for name, (agent, tid) in saved["tasks"].items():
        c = tck if agent == "tck" else sink
        out["get"][name] = MessageToDict(await call(c.get_task(GetTaskRequest(id=tid, history_length=10))))
    ids = lambda r: sorted(t.id for t in r.tasks)  # noqa: E731
    out["lists"]["tck"] = ids(await call(tck.list_tasks(ListTasksRequest(page_size=100))))
    out["lists"]["tck-context"] = ids(
        await call(tck.list_tasks(ListTasksRequest(context_id=saved["context"], page_size=100)))
    )
    out["lists"]["sink"] = ids(await call(sink.list_tasks(ListTasksRequest(page_size=100))))
    for name, (agent, tid) in saved["tasks"].items():
        if name not in ("asks", "held"):
            continue
        c = tck if agent == "tck" else sink
        got = await call(c.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=tid, id=f"hook-{name}")))
        listed = await call(c.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=tid)))
        out["push"][name] = {"get": MessageToDict(got), "list": MessageToDict(listed)}
    return out


async def before(args):
    tck, sink, streaming = await clients(args.url)
    ctx = f"restart-{uuid.uuid4().hex[:8]}"
    tasks = {}
    t = await send_task(tck, msg("tck-complete-task", context_id=ctx))
    assert t.status.state == TaskState.TASK_STATE_COMPLETED, t.status
    tasks["done"] = ("tck", t.id)
    t = await send_task(tck, msg("tck-input-required", context_id=ctx))
    assert t.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, t.status
    tasks["asks"] = ("tck", t.id)
    t = await send_task(tck, msg("tck-reject-task"))
    assert t.status.state == TaskState.TASK_STATE_REJECTED, t.status
    tasks["rejected"] = ("tck", t.id)
    t = await send_task(sink, msg("hold"), return_immediately=True)
    t = await call(sink.cancel_task(CancelTaskRequest(id=t.id)))
    assert t.status.state == TaskState.TASK_STATE_CANCELED, t.status
    tasks["canceled"] = ("sink", t.id)
    t = await send_task(sink, msg("hold"), return_immediately=True)
    assert t.status.state == TaskState.TASK_STATE_SUBMITTED, t.status
    tasks["held"] = ("sink", t.id)
    for name in ("asks", "held"):
        agent, tid = tasks[name]
        c = tck if agent == "tck" else sink
        await call(
            c.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=tid, id=f"hook-{name}", url=args.hook, token=f"tok-{name}")
            )
        )
    saved = {"context": ctx, "tasks": tasks}
    saved["reads"] = await reads(tck, sink, saved)
    with open(args.out, "w") as f:
        json.dump(saved, f)
    for c in (tck, sink, streaming):
        await c.close()
    print(f"ok   python-sdk-restart before: {len(tasks)} tasks in 5 states, 2 push configs")
    return 0


class Checks:
    def __init__(self, args, saved, tck, sink, streaming):
        self.args, self.saved = args, saved
        self.tck, self.sink, self.streaming = tck, sink, streaming

    def tid(self, name):
        return self.saved["tasks"][name][1]

    async def reads_are_as_before(self):
        now = await reads(self.tck, self.sink, self.saved)
        for part in ("get", "lists", "push"):
            for k, v in self.saved["reads"][part].items():
                assert now[part][k] == v, f"{part} {k}: before {v}, after {now[part][k]}"

    async def subscribe_then_follow_up_completes(self):
        asks = self.tid("asks")
        events = []
        first = asyncio.Event()

        async def subscribe():
            async for e in self.streaming.subscribe(SubscribeToTaskRequest(id=asks)):
                events.append(e)
                first.set()

        sub = asyncio.create_task(asyncio.wait_for(subscribe(), TIMEOUT))
        await asyncio.wait_for(first.wait(), TIMEOUT)
        assert events[0].HasField("task") and events[0].task.id == asks, events[0]
        assert events[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, events[0]
        t = await send_task(self.tck, msg("tck-complete-task", "more", task_id=asks))
        assert t.status.state == TaskState.TASK_STATE_COMPLETED, t.status
        await sub
        last = events[-1]
        assert last.HasField("status_update"), last
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, last

    async def cancel_of_the_open_task(self):
        t = await call(self.sink.cancel_task(CancelTaskRequest(id=self.tid("held"))))
        assert t.status.state == TaskState.TASK_STATE_CANCELED, t.status

    async def the_webhook_hears_the_terminal_states(self):
        want = {self.tid("asks"): "TASK_STATE_COMPLETED", self.tid("held"): "TASK_STATE_CANCELED"}
        deadline = time.monotonic() + 15
        while True:
            try:
                with open(self.args.hook_file) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                lines = []
            heard = {tid for tid, state in want.items() if any(tid in l and state in l for l in lines)}
            if heard == set(want):
                return
            assert time.monotonic() < deadline, f"not heard: {set(want) - heard}; the webhook got {lines}"
            await asyncio.sleep(0.1)


async def after(args):
    with open(args.inp) as f:
        saved = json.load(f)
    tck, sink, streaming = await clients(args.url)
    checks = Checks(args, saved, tck, sink, streaming)
    passed = failed = 0
    for name in [
        "reads_are_as_before",
        "subscribe_then_follow_up_completes",
        "cancel_of_the_open_task",
        "the_webhook_hears_the_terminal_states",
    ]:
        try:
            await getattr(checks, name)()
            passed += 1
            print(f"ok   python-sdk-restart {name}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL python-sdk-restart {name}: {e!r}")
            traceback.print_exc()
    for c in (tck, sink, streaming):
        await c.close()
    print(f"python-sdk-restart: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def webhook(args):
    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with open(args.out, "a") as f:
                f.write(body.decode("utf-8", "replace").replace("\n", " ") + "\n")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Hook)
    print("READY", flush=True)
    server.serve_forever()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="role", required=True)
    w = sub.add_parser("webhook")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--out", required=True)
    b = sub.add_parser("before")
    b.add_argument("--url", required=True)
    b.add_argument("--hook", required=True)
    b.add_argument("--out", required=True)
    a = sub.add_parser("after")
    a.add_argument("--url", required=True)
    a.add_argument("--in", dest="inp", required=True)
    a.add_argument("--hook-file", required=True)
    args = p.parse_args()
    if args.role == "webhook":
        webhook(args)
        return 0
    try:
        return asyncio.run(before(args) if args.role == "before" else after(args))
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        print(f"python-sdk-restart {args.role}: 0 passed, 1 failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
