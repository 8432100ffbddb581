"""Two `a2a-broker mcp` servers, driven by the official MCP Python SDK
(`mcp` on PyPI) as two agents' MCP hosts would: a planner delegates to a
coder through one broker, the coder asks a question, the planner answers,
the coder completes with an artifact, the planner reads the result. The
SDK validates every non-error `structuredContent` against the tool's
`outputSchema`.

Usage: test_mcp.py --broker BIN --socket PATH (a broker serving PATH).
Prints one line per check; exits 1 on the first failure.
"""

import argparse
import asyncio
import sys

from mcp import Client, StdioServerParameters

ACTIONS = ["discover", "send", "get", "wait", "complete", "cancel", "lease", "release"]


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def server(broker, socket, name, description):
    return StdioServerParameters(
        command=broker,
        args=["mcp", "--socket", socket, "--as", name, "--description", description],
    )


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(client, **args):
    r = await asyncio.wait_for(client.call_tool("A2A", args), 30)
    return r


async def main(broker, socket):
    async with Client(server(broker, socket, "planner", "plans the work"), read_timeout_seconds=30) as planner, \
            Client(server(broker, socket, "coder", "writes Rust code"), read_timeout_seconds=30) as coder:
        tools = (await planner.list_tools()).tools
        check([t.name for t in tools] == ["A2A"], "tools/list has the one tool A2A")
        tool = tools[0]
        check(tool.input_schema["properties"]["action"]["enum"] == ACTIONS, "its input schema lists the eight actions")
        check(tool.input_schema["properties"]["timeoutSeconds"]["maximum"] == 120, "timeoutSeconds has maximum 120")
        check(tool.output_schema is not None and tool.output_schema["type"] == "object", "it declares an outputSchema")
        check("token" not in str(tool.input_schema).lower(), "no token in the schema")

        r = await call(planner, action="discover")
        check(not r.is_error and [p["name"] for p in r.structured_content["peers"]] == ["coder"],
              "discover: the planner sees the coder")
        check(r.structured_content["peers"][0]["description"] == "writes Rust code", "discover: with its description")

        r = await call(planner, action="send", to="coder", text="Write the parser in src/parse.rs")
        task = r.structured_content["taskId"]
        check(r.structured_content["state"] == "submitted", "send: a new task, submitted")

        r = await call(coder, action="wait", timeoutSeconds=20)
        ev = r.structured_content["events"]
        check([(e["taskId"], e["state"], e["from"]) for e in ev] == [(task, "submitted", "planner")],
              "wait: the coder gets the new task from the planner")
        check('<peer-text from="planner">' in text(r), "wait: the planner's text is framed as untrusted peer text")

        r = await call(coder, action="complete", taskId=task, state="input-required", text="LL or PEG?")
        check(r.structured_content == {"taskId": task, "state": "input-required"}, "complete: input-required")

        r = await call(planner, action="wait", timeoutSeconds=20)
        ev = r.structured_content["events"]
        check(ev and ev[0]["state"] == "input-required" and ev[0]["text"] == "LL or PEG?",
              "wait: the planner gets the question")
        check("send(taskId=" in text(r), "the text says how to answer")

        r = await call(planner, action="send", taskId=task, text="PEG")
        check(r.structured_content == {"taskId": task, "state": "working"}, "send: the answer resumes the task")

        r = await call(coder, action="wait", timeoutSeconds=20)
        check(r.structured_content["events"][0]["text"] == "PEG", "wait: the coder gets the answer")

        r = await call(coder, action="complete", taskId=task, text="Done.", artifact="fn parse() {}",
                       artifactName="parse.rs")
        check(r.structured_content == {"taskId": task, "state": "completed"}, "complete: completed with an artifact")

        r = await call(planner, action="wait", timeoutSeconds=20)
        ev = r.structured_content["events"]
        check([e["state"] for e in ev][-1] == "completed" and ev[0]["artifact"]["name"] == "parse.rs",
              "wait: the planner gets the artifact and the completion")

        r = await call(planner, action="get", taskId=task)
        s = r.structured_content
        check(s["state"] == "completed" and [h["from"] for h in s["history"]] == ["planner", "coder", "planner", "coder"]
              and s["artifacts"] == [{"name": "parse.rs", "text": "fn parse() {}"}], "get: the whole task")

        r = await call(planner, action="send", to="codr", text="again")
        check(r.is_error and 'Did you mean "coder"?' in text(r), "a misspelt peer is a tool error naming the nearest")
        r = await call(planner, action="complete", taskId=task, text="done")
        check(r.is_error and r.structured_content["error"]["code"] in ("task-finished", "not-worker"),
              "complete on a requested task is a tool error")
        progress = []

        async def on_progress(done, total, message):
            progress.append((done, total))

        r = await asyncio.wait_for(
            planner.call_tool("A2A", {"action": "wait", "timeoutSeconds": 3}, progress_callback=on_progress), 30)
        check(not r.is_error and r.structured_content == {"events": []}, "an empty wait ends after its timeout")
        check(len(progress) >= 1 and all(t == 3 for _, t in progress),
              f"progress notifications while waiting ({len(progress)})")
        r = await call(planner, action="wait", timeoutSeconds=1000)
        check(r.is_error and "120" in text(r), "a wait over the ceiling is a tool error")
    # Both hosts closed their servers' stdin: the agents left the broker.
    async with Client(server(broker, socket, "observer", "looks"), read_timeout_seconds=30) as observer:
        for _ in range(50):
            r = await call(observer, action="discover")
            if r.structured_content["peers"] == []:
                break
            await asyncio.sleep(0.1)
        check(r.structured_content["peers"] == [], "closing a server's stdin deregisters its agent")
    print("mcp: 2 servers through a whole delegation", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", required=True)
    ap.add_argument("--socket", required=True)
    a = ap.parse_args()
    asyncio.run(main(a.broker, a.socket))
