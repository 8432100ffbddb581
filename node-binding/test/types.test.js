// index.d.ts against PI-Desktop's a2a.ts (test/fixtures/pi-a2a.ts): code
// written with a2a.ts's types type-checks under `strict`, and, compiled
// and run against a real broker, passes its values through the addon and
// gets back values of those types. A deliberately wrong file must fail,
// so this check can fail.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Module = require('node:module')
const ts = require('typescript')
const { spawnBroker, deadline, typeErrors } = require('./helpers')

const fixtures = path.join(__dirname, 'fixtures')

function diagnostics(file) {
  return typeErrors(path.join(fixtures, file))
}

test('code written against a2a.ts type-checks against index.d.ts', () => {
  assert.deepEqual(diagnostics('pi-usage.ts'), [])
})

test('a wrong use does not type-check', () => {
  const d = diagnostics('pi-usage-wrong.ts')
  assert.equal(d.length, 2, d.join('\n'))
  assert.ok(d.some((m) => m.includes("'Task'") && m.includes("'A2AMessage'")), d.join('\n'))
  assert.ok(d.some((m) => m.includes('"sleeping"')), d.join('\n'))
})

test('the typed values round-trip through the addon', async () => {
  const file = path.join(fixtures, 'pi-usage.ts')
  const { outputText } = ts.transpileModule(require('node:fs').readFileSync(file, 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
    fileName: file,
  })
  const m = new Module(file, module)
  m.filename = file
  m.paths = Module._nodeModulePaths(fixtures)
  m._compile(outputText, file)
  const broker = await deadline(spawnBroker(), 900_000, 'spawn broker')
  const seen = await deadline(m.exports.roundTrip(broker), 20_000, 'roundTrip')
  assert.deepEqual(seen, ['status-update', 'A2A_UNKNOWN_TASK', 'ts-worker', 'working', 'ts-a', 'ts-p', 'ts-p'])
  await broker.close()
})
