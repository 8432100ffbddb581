// `agent.tool(options)`: the A2A tool, defined once in Rust (`a2a-tool`:
// schema, session, texts), in the shape the Pi agent runtime
// (`@mariozechner/pi-agent-core`) takes:
//   {name, label, description, parameters, execute(toolCallId, params, signal?, onUpdate?)}
// resolving to {content: [{type: 'text', text}], details}.
//
// - A mistake of the model (a misspelt peer, an unknown task, ...) is a
//   tool error: by default `execute` throws an Error whose message is the
//   text with the fix (the Pi runtime turns a throw into an error result the
//   model reads), with `details` on it; `{errors: 'return'}` resolves instead
//   with `details.isError` set.
// - The abort signal ends a `wait` early (within 50 ms): it resolves with
//   what arrived until then.
// - `onUpdate` gets a progress result about once a second while a `wait`
//   blocks.
'use strict'

const PROGRESS_MS = 1000

module.exports = (native) => {
  function makeTool(nativeAgent, options = {}) {
    const t = native.createTool(nativeAgent, options.turnCap)
    const throwErrors = options.errors !== 'return'
    let nextCall = 1
    /** Runs one call; `{text, structured, isError}` as the Rust session answers it. */
    async function call(params, signal) {
      const id = nextCall
      nextCall = nextCall >= 0xffffffff ? 1 : nextCall + 1
      const pending = t.call(JSON.stringify(params ?? {}), id)
      const onAbort = () => t.abort(id)
      if (signal) {
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
      }
      try {
        return await pending
      } finally {
        if (signal) signal.removeEventListener('abort', onAbort)
      }
    }
    return {
      name: t.name,
      label: options.label ?? t.title,
      description: t.description,
      parameters: JSON.parse(t.inputSchema),
      outputSchema: JSON.parse(t.outputSchema),
      call,
      async execute(toolCallId, params, signal, onUpdate) {
        let timer = null
        if (typeof onUpdate === 'function' && params && params.action === 'wait') {
          const started = Date.now()
          const limit = typeof params.timeoutSeconds === 'number' ? params.timeoutSeconds : 30
          timer = setInterval(() => {
            const waited = Math.round((Date.now() - started) / 1000)
            onUpdate({
              content: [{ type: 'text', text: `Waiting for updates from other agents (${waited} s of ${limit} s).` }],
              details: { waitedSeconds: waited, timeoutSeconds: limit },
            })
          }, PROGRESS_MS)
        }
        let r
        try {
          r = await call(params, signal)
        } finally {
          if (timer) clearInterval(timer)
        }
        const details = { ...r.structured, isError: r.isError }
        if (r.isError && throwErrors) {
          const e = new Error(r.text)
          e.details = details
          throw e
        }
        return { content: [{ type: 'text', text: r.text }], details }
      },
    }
  }
  return { makeTool }
}
