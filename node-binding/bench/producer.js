// The event source of bench.js, in its own process so that its work never
// counts against the receiver's main thread: a worker agent that moves
// the given tasks through `working` status updates, pipelined (each one
// is an a2a.task.event to the requester, the receiver under test).
// Protocol on stdin/stdout, one JSON line each:
//   in:  {"register": name}        out: {"registered": id}
//   in:  {"run": [taskIds], "perTask": n, "window": w}   out: {"done": count}
'use strict'
const readline = require('node:readline')
const { Broker } = require('..')

async function main() {
  const [socket, secret] = process.argv.slice(2)
  const broker = await Broker.connect({ socket, secret })
  let worker = null
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    const cmd = JSON.parse(line)
    if (cmd.register) {
      if (worker) await worker.deregister()
      worker = await broker.register({ contextId: `producer-${cmd.register}`, card: { name: cmd.register } })
      console.log(JSON.stringify({ registered: worker.id }))
    } else if (cmd.run) {
      const jobs = []
      for (const id of cmd.run) for (let i = 0; i < cmd.perTask; i++) jobs.push(id)
      let next = 0
      const lane = async () => {
        while (next < jobs.length) await worker.status({ id: jobs[next++], state: 'working' })
      }
      await Promise.all(Array.from({ length: cmd.window }, lane))
      console.log(JSON.stringify({ done: jobs.length }))
    }
  }
  await broker.close()
}
main().catch((e) => {
  console.error(e)
  process.exit(1)
})
