// `agent.tool()`: the A2A tool in the Pi agent runtime's shape, driven
// through a whole delegation between two agents on a real broker, plus
// the abort signal, progress updates and tool errors.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnBroker, deadline, typeErrors } = require('./helpers')

async function pair() {
  const broker = await spawnBroker()
  const planner = await broker.register({ contextId: 'ctx-plan', card: { name: 'planner' } })
  const coder = await broker.register({
    contextId: 'ctx-code',
    card: { name: 'coder', description: 'writes Rust code' },
  })
  return { broker, planner: planner.tool(), coder: coder.tool() }
}

const run = (tool, params, signal, onUpdate) =>
  deadline(tool.execute(`call-${params.action}`, params, signal, onUpdate), 20_000, params.action)

test('the tool has the Pi runtime shape and no token in its schema', async () => {
  const { broker, planner } = await pair()
  try {
    assert.equal(planner.name, 'A2A')
    assert.equal(typeof planner.label, 'string')
    assert.match(planner.description, /discover/)
    assert.deepEqual(planner.parameters.properties.action.enum, [
      'discover', 'send', 'get', 'wait', 'complete', 'cancel', 'lease', 'release',
    ])
    assert.equal(planner.parameters.properties.timeoutSeconds.maximum, 120)
    assert.equal(typeof planner.execute, 'function')
    assert.doesNotMatch(JSON.stringify(planner.parameters), /token/i)
  } finally {
    await broker.close()
  }
})

test('agent.tool() type-checks as the Pi runtime\'s AgentTool', () => {
  assert.deepEqual(typeErrors(path.join(__dirname, 'fixtures', 'tool-usage.ts')), [])
})

test('a whole delegation through execute()', async () => {
  const { broker, planner, coder } = await pair()
  try {
    const found = await run(planner, { action: 'discover' })
    assert.deepEqual(found.details.peers.map((p) => p.name), ['coder'])
    assert.equal(found.content[0].type, 'text')

    const sent = await run(planner, { action: 'send', to: 'coder', text: 'Write the parser' })
    const taskId = sent.details.taskId
    assert.equal(sent.details.state, 'submitted')

    const got = await run(coder, { action: 'wait', timeoutSeconds: 10 })
    assert.deepEqual(got.details.events.map((e) => [e.taskId, e.state, e.from, e.text]), [
      [taskId, 'submitted', 'planner', 'Write the parser'],
    ])
    assert.match(got.content[0].text, /<peer-text from="planner">/)

    const asked = await run(coder, { action: 'complete', taskId, state: 'input-required', text: 'Which file?' })
    assert.equal(asked.details.state, 'input-required')
    const question = await run(planner, { action: 'wait', timeoutSeconds: 10 })
    assert.equal(question.details.events[0].state, 'input-required')
    assert.match(question.content[0].text, /answer with send\(taskId=/)

    await run(planner, { action: 'send', taskId, text: 'src/parse.rs' })
    const answer = await run(coder, { action: 'wait', timeoutSeconds: 10 })
    assert.equal(answer.details.events[0].text, 'src/parse.rs')

    const done = await run(coder, { action: 'complete', taskId, text: 'Done.', artifact: 'fn parse() {}', artifactName: 'parse.rs' })
    assert.equal(done.details.state, 'completed')
    const result = await run(planner, { action: 'wait', timeoutSeconds: 10 })
    assert.deepEqual(result.details.events.map((e) => e.state), ['working', 'completed'])
    assert.deepEqual(result.details.events[0].artifact, { name: 'parse.rs', text: 'fn parse() {}' })

    const task = await run(planner, { action: 'get', taskId })
    assert.deepEqual(task.details.history.map((m) => m.from), ['planner', 'coder', 'planner', 'coder'])
    assert.deepEqual(task.details.artifacts, [{ name: 'parse.rs', text: 'fn parse() {}' }])
  } finally {
    await broker.close()
  }
})

test('the abort signal ends a wait early, and onUpdate hears progress', async () => {
  const { broker, planner } = await pair()
  try {
    const ac = new AbortController()
    const updates = []
    const started = Date.now()
    setTimeout(() => ac.abort(), 1500)
    const r = await run(planner, { action: 'wait', timeoutSeconds: 60 }, ac.signal, (u) => updates.push(u))
    const took = Date.now() - started
    assert.ok(took < 5000, `the aborted wait took ${took} ms`)
    assert.deepEqual(r.details.events, [])
    assert.match(r.content[0].text, /stopped/)
    assert.ok(updates.length >= 1, 'no progress update')
    assert.match(updates[0].content[0].text, /Waiting/)
  } finally {
    await broker.close()
  }
})

test('a mistake is a tool error with the fix', async () => {
  const { broker, planner } = await pair()
  try {
    await assert.rejects(run(planner, { action: 'send', to: 'codr', text: 'x' }), (e) => {
      assert.match(e.message, /Did you mean "coder"\?/)
      assert.equal(e.details.error.code, 'unknown-peer')
      assert.equal(e.details.isError, true)
      return true
    })
    const asker = await broker.register({ contextId: 'ctx-x', card: { name: 'asker' } })
    const soft = asker.tool({ errors: 'return' })
    const r = await run(soft, { action: 'get', taskId: 'nope' })
    assert.equal(r.details.isError, true)
    assert.equal(r.details.error.code, 'unknown-task')
  } finally {
    await broker.close()
  }
})
