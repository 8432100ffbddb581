// Test kit for the node tests: the broker binary (the Rust test kit's rule:
// $A2A_BROKER_BIN, else `cargo run -p a2a-testkit --bin a2a-broker-path`,
// which builds it if missing), fresh databases, deadlines.
'use strict'
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const test = require('node:test')
const { Broker } = require('..')

let bin = null
function brokerBin() {
  if (bin) return bin
  bin = process.env.A2A_BROKER_BIN
  if (!bin) {
    bin = execFileSync('cargo', ['run', '-q', '-p', 'a2a-testkit', '--bin', 'a2a-broker-path'], {
      cwd: path.join(__dirname, '..'),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 900_000,
    }).trim()
    process.env.A2A_BROKER_BIN = bin
  }
  return bin
}

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'a2a-node-test-'))
}

/** A broker on a fresh database. */
async function spawnBroker() {
  const dir = tempDir()
  return Broker.spawn({ db: path.join(dir, 'a2a.db'), socket: path.join(dir, 's.sock'), bin: brokerBin() })
}

/** `p`, or a rejection naming `what` after `ms`. */
function deadline(p, ms, what) {
  let timer
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms)
  })
  return Promise.race([p, t]).finally(() => clearTimeout(timer))
}

/**
 * One broker for a whole test file: spawned before its first test (handed
 * to `set`), closed after its last.
 */
function brokerForFile(set) {
  let broker
  test.before(async () => {
    broker = await deadline(spawnBroker(), 900_000, 'spawn broker')
    set(broker)
  })
  test.after(async () => {
    await broker.close()
  })
}

/**
 * The TypeScript diagnostics of `file` (a path) compiled under `strict`
 * for ES2022/CommonJS, as the addon's users compile: their messages.
 */
function typeErrors(file) {
  const ts = require('typescript')
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    skipLibCheck: false,
  })
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

/** Resolves with the rejection of `p` (fails if it resolves). */
async function rejection(p) {
  let v
  try {
    v = await deadline(p, 20_000, 'call')
  } catch (e) {
    return e
  }
  throw new Error(`expected a rejection, got ${JSON.stringify(v)}`)
}

module.exports = { brokerBin, tempDir, spawnBroker, brokerForFile, deadline, rejection, typeErrors }
