// No hanging handle: a Node process that used the addon (a spawned
// broker, calls, an onEvent callback, a serving agent) exits by itself
// once its work is done, and its broker exits with it.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { brokerBin, tempDir } = require('./helpers')

/** Resolves once `pid` is gone, false after `ms`. */
async function gone(pid, ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    try {
      process.kill(pid, 0)
    } catch (e) {
      if (e.code === 'ESRCH') return true
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

test('the process exits by itself when its work is done, and its broker with it', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'exit-child.js'), tempDir()], {
    env: { ...process.env, A2A_BROKER_BIN: brokerBin() },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const deadlineMs = 30_000
  const result = await new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve({ timedOut: true })
    }, deadlineMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal })
    })
  })
  assert.ok(!result.timedOut, `the child did not exit within ${deadlineMs} ms; stdout: ${out} stderr: ${err}`)
  assert.equal(result.code, 0, `stderr: ${err}`)
  const lines = out.trim().split('\n')
  assert.equal(lines.at(-1), 'done')
  const { brokerPid } = JSON.parse(lines[0])
  assert.ok(await gone(brokerPid, 10_000), `broker ${brokerPid} outlived its parent`)
})
