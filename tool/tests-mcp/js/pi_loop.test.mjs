// The Pi agent runtime's own loop (`runAgentLoop` of
// `@mariozechner/pi-agent-core`) holding `agent.tool()` of the Node addon,
// with a scripted model standing in for the LLM: a planner's loop
// delegates to a coder's loop through a real broker, the coder asks a
// question, the planner answers, the coder finishes, and both loops end.
// The script reads only what the tool returned (its details), as a model
// reads the text, so each step depends on the tool having worked.
//
// Needs the addon built (node-binding/a2a.node) and A2A_BROKER_BIN.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { runAgentLoop } from '@mariozechner/pi-agent-core'
import { createAssistantMessageEventStream } from '@mariozechner/pi-ai'

const require = createRequire(import.meta.url)
const { Broker } = require('../../../node-binding')

const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }
const model = { id: 'scripted', name: 'scripted', api: 'scripted', provider: 'scripted', baseUrl: '', reasoning: false, input: ['text'], cost: usage.cost, contextWindow: 100000, maxTokens: 1000 }

/** A stream function whose "model" is `decide(lastToolResult)`: a tool
 * call `{args}` or a final answer `{text}`. */
function scripted(decide, calls) {
  return (_model, context) => {
    const results = context.messages.filter((m) => m.role === 'toolResult')
    const step = decide(results[results.length - 1])
    calls.push(step)
    const content = step.args
      ? [{ type: 'toolCall', id: `call-${calls.length}`, name: 'A2A', arguments: step.args }]
      : [{ type: 'text', text: step.text }]
    const message = { role: 'assistant', content, api: 'scripted', provider: 'scripted', model: 'scripted', usage, stopReason: step.args ? 'toolUse' : 'stop', timestamp: Date.now() }
    const stream = createAssistantMessageEventStream()
    queueMicrotask(() => {
      stream.push({ type: 'start', partial: message })
      stream.push({ type: 'done', reason: message.stopReason, message })
    })
    return stream
  }
}

/** The planner's script. */
function planner(last) {
  const d = last?.details
  if (!last) return { args: { action: 'discover' } }
  if (d.peers) return { args: { action: 'send', to: d.peers[0].name, text: 'Write the parser in src/parse.rs' } }
  if (d.events) {
    const done = d.events.find((e) => e.state === 'completed')
    if (done) return { text: `The coder finished: ${done.text}` }
    const q = d.events.find((e) => e.state === 'input-required')
    if (q) return { args: { action: 'send', taskId: q.taskId, text: 'Use a PEG grammar.' } }
  }
  return { args: { action: 'wait', timeoutSeconds: 20 } }
}

/** The coder's script: asks once, then completes. */
function coder(last) {
  const d = last?.details
  if (!last) return { args: { action: 'wait', timeoutSeconds: 20 } }
  if (d.events) {
    const task = d.events.find((e) => e.state === 'submitted')
    if (task) return { args: { action: 'complete', taskId: task.taskId, state: 'input-required', text: 'LL or PEG?' } }
    const answer = d.events.find((e) => e.state === 'working')
    if (answer) return { args: { action: 'complete', taskId: answer.taskId, text: `Done, with ${answer.text}` } }
  }
  if (d.state === 'completed') return { text: 'I finished the task.' }
  return { args: { action: 'wait', timeoutSeconds: 20 } }
}

async function loop(agent, decide, prompt) {
  const calls = []
  const results = []
  const context = { systemPrompt: 'You coordinate through the A2A tool.', messages: [], tools: [agent.tool()] }
  const config = { model, convertToLlm: (messages) => messages }
  const emit = (e) => {
    if (e.type === 'tool_execution_end') results.push(e)
  }
  const messages = await runAgentLoop(
    [{ role: 'user', content: prompt, timestamp: Date.now() }],
    context,
    config,
    emit,
    undefined,
    scripted(decide, calls),
  )
  return { calls, results, messages }
}

test('two Pi agent loops delegate through the broker with agent.tool()', async () => {
  assert.ok(process.env.A2A_BROKER_BIN, 'A2A_BROKER_BIN names the broker')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'a2a-pi-'))
  const broker = await Broker.spawn({ db: path.join(dir, 'db'), socket: path.join(dir, 's.sock'), bin: process.env.A2A_BROKER_BIN })
  try {
    const p = await broker.register({ contextId: 'ctx-plan', card: { name: 'planner' } })
    const c = await broker.register({ contextId: 'ctx-code', card: { name: 'coder', description: 'writes code' } })
    const [pl, co] = await Promise.all([
      loop(p, planner, 'Get the parser written.'),
      loop(c, coder, 'Serve the tasks you are given.'),
    ])
    const final = (r) => r.messages.filter((m) => m.role === 'assistant').at(-1).content[0].text
    assert.equal(final(pl), 'The coder finished: Done, with Use a PEG grammar.')
    assert.equal(final(co), 'I finished the task.')
    assert.ok(pl.results.length >= 4 && co.results.length >= 4, 'each loop made its tool calls')
    assert.ok(pl.results.every((r) => r.isError === false), JSON.stringify(pl.results))
    assert.ok(co.results.every((r) => r.isError === false), JSON.stringify(co.results))
    const actions = (r) => r.calls.filter((s) => s.args).map((s) => s.args.action)
    assert.deepEqual(actions(pl).slice(0, 2), ['discover', 'send'])
    assert.ok(actions(pl).includes('wait'))
    assert.deepEqual(actions(co).filter((a) => a === 'complete'), ['complete', 'complete'])
    // The broker agrees: the task is completed, with the whole exchange.
    const tasks = await p.listTasks({ role: 'requester' })
    assert.equal(tasks.tasks.length, 1)
    assert.equal(tasks.tasks[0].status.state, 'completed')
    assert.equal(tasks.tasks[0].history.length, 4)
  } finally {
    await broker.close()
  }
})
