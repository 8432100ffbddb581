// Issue 25: the addon's Rust modules import each other without a cycle (a
// module's `crate::x` names are its imports): the lower layer holds what
// it needs, never the facade above it. Read from the sources, so a cycle
// fails here before anyone has to untangle it.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const SRC = path.join(__dirname, '..', 'src')

/** module -> the modules it names (`crate::x`), from src/*.rs. */
function imports() {
  const graph = new Map()
  for (const file of fs.readdirSync(SRC).filter((f) => f.endsWith('.rs'))) {
    const name = file.replace(/\.rs$/, '')
    if (name === 'lib') continue
    const text = fs.readFileSync(path.join(SRC, file), 'utf8')
    // Comments may name modules without importing them.
    const code = text.replace(/\/\/.*$/gm, '')
    const used = new Set([...code.matchAll(/crate::([a-z_]+)/g)].map((m) => m[1]))
    used.delete(name)
    graph.set(name, used)
  }
  return graph
}

/** A cycle of `graph` as a path, or null. */
function findCycle(graph) {
  const state = new Map() // 1: on the path, 2: done
  const pathStack = []
  function visit(n) {
    state.set(n, 1)
    pathStack.push(n)
    for (const m of graph.get(n) || []) {
      if (!graph.has(m)) continue
      if (state.get(m) === 1) return [...pathStack.slice(pathStack.indexOf(m)), m]
      if (!state.has(m)) {
        const c = visit(m)
        if (c) return c
      }
    }
    pathStack.pop()
    state.set(n, 2)
    return null
  }
  for (const n of graph.keys()) {
    if (!state.has(n)) {
      const c = visit(n)
      if (c) return c
    }
  }
  return null
}

test('the addon modules import each other without a cycle', () => {
  const graph = imports()
  assert.ok(graph.has('settle') && graph.has('agent') && graph.has('broker'), 'the sources were read')
  const cycle = findCycle(graph)
  assert.equal(cycle, null, `import cycle: ${cycle && cycle.join(' -> ')}`)
})

test('the cycle check finds a cycle', () => {
  const g = new Map([
    ['settle', new Set(['agent'])],
    ['agent', new Set(['settle'])],
  ])
  assert.deepEqual(findCycle(g), ['settle', 'agent', 'settle'])
})
