// The Vercel AI SDK's own loop (`generateText` of `ai` with tools and
// `stopWhen`) holding the Node addon's A2A tool, with the SDK's mock
// language model scripted to stand in for the LLM: a planner delegates to a
// coder through a real broker, the coder asks, the planner answers, the
// coder finishes, and both loops end. The script reads only the tool
// results the SDK hands back to the model.
//
// Needs the addon built (node-binding/a2a.node) and A2A_BROKER_BIN.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { generateText, tool, jsonSchema, stepCountIs } from 'ai'
import { MockLanguageModelV2 } from 'ai/test'

const require = createRequire(import.meta.url)
const { Broker } = require('../../../node-binding')

/** The last tool result in the prompt, as the model would read it. */
function lastResult(prompt) {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i]
    if (m.role === 'tool') {
      const part = m.content[m.content.length - 1]
      return part.output.value
    }
  }
  return null
}

/** A mock model whose answer is `decide(lastToolResult)`. */
function scripted(decide) {
  let n = 0
  return new MockLanguageModelV2({
    doGenerate: async ({ prompt }) => {
      const step = decide(lastResult(prompt))
      n++
      const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
      if (step.args) {
        return {
          content: [{ type: 'tool-call', toolCallId: `call-${n}`, toolName: 'A2A', input: JSON.stringify(step.args) }],
          finishReason: 'tool-calls',
          usage,
          warnings: [],
        }
      }
      return { content: [{ type: 'text', text: step.text }], finishReason: 'stop', usage, warnings: [] }
    },
  })
}

function planner(r) {
  if (!r) return { args: { action: 'discover' } }
  if (r.peers) return { args: { action: 'send', to: r.peers[0].name, text: 'Write the parser' } }
  if (r.events) {
    const done = r.events.find((e) => e.state === 'completed')
    if (done) return { text: `The coder finished: ${done.text}` }
    const q = r.events.find((e) => e.state === 'input-required')
    if (q) return { args: { action: 'send', taskId: q.taskId, text: 'PEG.' } }
  }
  return { args: { action: 'wait', timeoutSeconds: 20 } }
}

function coder(r) {
  if (!r) return { args: { action: 'wait', timeoutSeconds: 20 } }
  if (r.events) {
    const task = r.events.find((e) => e.state === 'submitted')
    if (task) return { args: { action: 'complete', taskId: task.taskId, state: 'input-required', text: 'LL or PEG?' } }
    const answer = r.events.find((e) => e.state === 'working')
    if (answer) return { args: { action: 'complete', taskId: answer.taskId, text: `Done, with ${answer.text}` } }
  }
  if (r.state === 'completed') return { text: 'I finished the task.' }
  return { args: { action: 'wait', timeoutSeconds: 20 } }
}

/** The README's adapter: the tool's schema as is, its structured result to the model. */
function a2aTool(agent) {
  const a2a = agent.tool({ errors: 'return' })
  return tool({
    description: a2a.description,
    inputSchema: jsonSchema(a2a.parameters),
    execute: async (args, { abortSignal }) => (await a2a.call(args, abortSignal)).structured,
  })
}

test('two AI SDK loops delegate through the broker with the A2A tool', async () => {
  assert.ok(process.env.A2A_BROKER_BIN, 'A2A_BROKER_BIN names the broker')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'a2a-ai-'))
  const broker = await Broker.spawn({ db: path.join(dir, 'db'), socket: path.join(dir, 's.sock'), bin: process.env.A2A_BROKER_BIN })
  try {
    const p = await broker.register({ contextId: 'ctx-plan', card: { name: 'planner' } })
    const c = await broker.register({ contextId: 'ctx-code', card: { name: 'coder' } })
    const run = (agent, decide, prompt) =>
      generateText({ model: scripted(decide), tools: { A2A: a2aTool(agent) }, stopWhen: stepCountIs(20), prompt })
    const [pl, co] = await Promise.all([
      run(p, planner, 'Get the parser written.'),
      run(c, coder, 'Serve the tasks you are given.'),
    ])
    assert.equal(pl.text, 'The coder finished: Done, with PEG.')
    assert.equal(co.text, 'I finished the task.')
    const calls = (r) => r.steps.flatMap((s) => s.toolCalls.map((t) => t.input.action))
    assert.deepEqual(calls(pl).slice(0, 2), ['discover', 'send'])
    assert.deepEqual(calls(co).filter((a) => a === 'complete'), ['complete', 'complete'])
    const tasks = await p.listTasks({ role: 'requester' })
    assert.equal(tasks.tasks[0].status.state, 'completed')
    assert.equal(tasks.tasks[0].history.length, 4)
  } finally {
    await broker.close()
  }
})
