// The README's snippet, run as written from a project of its own: a fresh
// directory whose node_modules/@a2a-broker/node is this package (what
// `npm install /path/to/node-binding` makes), `a2a-broker` from
// A2A_BROKER_BIN as `Broker.spawn` finds it.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { brokerBin, tempDir } = require('./helpers')

function snippet() {
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
  const m = readme.match(/```js\n([\s\S]*?)```/)
  assert.ok(m, 'README.md has a js block')
  return m[1]
}

test('the README snippet runs as written and completes its task', async () => {
  const dir = tempDir()
  const scope = path.join(dir, 'node_modules', '@a2a-broker')
  fs.mkdirSync(scope, { recursive: true })
  fs.symlinkSync(path.join(__dirname, '..'), path.join(scope, 'node'), 'dir')
  fs.writeFileSync(path.join(dir, 'main.js'), snippet())
  const env = { ...process.env, A2A_BROKER_BIN: brokerBin() }
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, ['main.js'], { cwd: dir, env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, stdout, stderr }),
    )
  })
  assert.equal(code, 0, stderr)
  assert.equal(stdout, 'completed\n', stderr)
  assert.ok(fs.existsSync(path.join(dir, 'host.db')), 'the database is where the snippet said')
})
