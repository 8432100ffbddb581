#!/usr/bin/env node
// Builds the addon from source with cargo and copies it to ./a2a.node
// (what `npm install` runs; no prebuilt download). Release by default;
// A2A_NODE_PROFILE=debug builds the debug profile (what CI does, sharing
// the artifacts of `cargo test --workspace`). Also copies the a2a-broker
// binary beside the addon when asked (A2A_NODE_WITH_BROKER=1), so
// `Broker.spawn` finds it there.
'use strict'
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const here = path.resolve(__dirname, '..')

// Installed from a tarball of `npm pack` there is no cargo workspace to
// build in (the crate inherits the workspace's settings), but the tarball
// carries the addon built when it was packed (`prepack` runs this script).
const inWorkspace =
  fs.existsSync(path.join(here, 'Cargo.toml')) &&
  /^\[workspace\]/m.test(readOr(path.join(here, '..', 'Cargo.toml')))
if (!inWorkspace) {
  if (fs.existsSync(path.join(here, 'a2a.node'))) {
    console.error(`a2a-node: no cargo workspace here; using the packed addon ${path.join(here, 'a2a.node')}`)
    process.exit(0)
  }
  console.error(
    `a2a-node: no cargo workspace above ${here} and no packed a2a.node: install from the repository ` +
      '(npm install /path/to/a2a-broker/node-binding) or from a tarball `npm pack` made there',
  )
  process.exit(1)
}

function readOr(file) {
  try {
    return fs.readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

const profile = process.env.A2A_NODE_PROFILE === 'debug' ? 'debug' : 'release'
const cargo = process.env.CARGO || 'cargo'
const args = ['build', '-p', 'a2a-node']
if (profile === 'release') args.push('--release')
if (process.env.A2A_NODE_WITH_BROKER === '1') args.push('-p', 'a2a-broker', '--bin', 'a2a-broker')
execFileSync(cargo, args, { cwd: here, stdio: 'inherit' })

const meta = JSON.parse(
  execFileSync(cargo, ['metadata', '--format-version', '1', '--no-deps'], {
    cwd: here,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  }),
)
const dir = path.join(meta.target_directory, profile)
const lib = { linux: 'liba2a_node.so', darwin: 'liba2a_node.dylib', win32: 'a2a_node.dll' }[process.platform]
if (!lib) throw new Error(`a2a-node: unsupported platform ${process.platform}`)
// Copy through a temporary name: replacing a loaded .so in place would
// corrupt a process that has it mapped.
const tmp = path.join(here, 'a2a.node.tmp')
fs.copyFileSync(path.join(dir, lib), tmp)
fs.renameSync(tmp, path.join(here, 'a2a.node'))
if (process.env.A2A_NODE_WITH_BROKER === '1') {
  const bin = path.join(here, 'a2a-broker')
  fs.copyFileSync(path.join(dir, 'a2a-broker'), bin + '.tmp')
  fs.renameSync(bin + '.tmp', bin)
}
console.error(`a2a-node: built ${profile} addon -> ${path.join(here, 'a2a.node')}`)
