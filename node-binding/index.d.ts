// Types of the a2a-node package (checked in; written by hand to match
// docs/protocol.md §3 Shapes field for field, which are PI-Desktop's
// packages/shared/src/a2a.ts shapes; test/types.test.js type-checks code
// written against a2a.ts with them).

// ---- docs/protocol.md §3 Shapes: JSON shapes ----

export type TaskState =
  | 'submitted'
  | 'working'
  | 'input-required'
  | 'auth-required'
  | 'completed'
  | 'canceled'
  | 'failed'
  | 'rejected'

export type Role = 'user' | 'agent'

/** Free-form `metadata` (ext): kept and returned as given. */
export type Metadata = Record<string, unknown>

export interface TextPart {
  kind: 'text'
  text: string
  metadata?: Metadata
}
export interface FileContent {
  name?: string
  mimeType?: string
  uri?: string
  /** Base64 bytes (decoded size at most A2A_MAX_FILE_BYTES). */
  bytes?: string
}
export interface FilePart {
  kind: 'file'
  file: FileContent
  metadata?: Metadata
}
export interface DataPart {
  kind: 'data'
  data: Record<string, unknown>
  metadata?: Metadata
}
export type Part = TextPart | FilePart | DataPart

export interface Message {
  /** Stamped by the broker (`user` for the requester, `agent` for the worker). */
  role: Role
  /** May be empty. */
  parts: Part[]
  messageId: string
  taskId?: string
  contextId?: string
  /** Stamped by the broker: the sender's peer id. */
  from?: string
  /** The recipient's peer id; `"*"` broadcasts (ext). */
  to?: string
  metadata?: Metadata
}

export interface Artifact {
  artifactId: string
  name?: string
  description?: string
  parts: Part[]
  metadata?: Metadata
}

export interface TaskStatus {
  state: TaskState
  message?: Message
  /** RFC 3339 UTC with milliseconds. */
  timestamp: string
}

export interface Task {
  kind: 'task'
  id: string
  contextId: string
  status: TaskStatus
  history: Message[]
  artifacts: Artifact[]
  agentName: string
  requesterName: string
  /** (ext) 1, then +1 per change. */
  version: number
}

export interface AgentSkill {
  id: string
  name: string
  description: string
  tags: string[]
}

export interface AgentCapabilities {
  streaming: boolean
  pushNotifications: boolean
}

export interface AgentCard {
  name: string
  description: string
  version: string
  skills: AgentSkill[]
  capabilities: AgentCapabilities
  defaultInputModes: string[]
  defaultOutputModes: string[]
  contextId?: string
  kind?: 'parent' | 'subagent'
}

/** What `register` accepts: `name` is required, the broker fills the rest. */
export type AgentCardInput = Pick<AgentCard, 'name'> & Partial<AgentCard>

export interface PushConfig {
  id: string
  url?: string
  token?: string
}

export interface SendConfiguration {
  blocking?: boolean
  historyLength?: number
  pushNotificationConfig?: PushConfig
}

// ---- events (docs/protocol.md §6 Events) ----

export interface TaskStatusUpdateEvent {
  kind: 'status-update'
  taskId: string
  contextId: string
  status: TaskStatus
  /** True for a terminal state. */
  final: boolean
}
export interface TaskArtifactUpdateEvent {
  kind: 'artifact-update'
  taskId: string
  contextId: string
  artifact: Artifact
  append: boolean
  lastChunk: boolean
}
export type StreamEvent = TaskStatusUpdateEvent | TaskArtifactUpdateEvent

export interface TaskEventParams {
  recipient: string
  recipientContextId: string
  contextId: string
  /** (ext) per-recipient sequence number. */
  seq: number
  /** (ext) the task's version after this change. */
  taskVersion: number
  event: StreamEvent
}
export interface PushParams {
  recipient: string
  recipientContextId: string
  contextId: string
  seq: number
  taskId: string
  token?: string
  status: TaskStatus
}
export interface LaggedParams {
  recipient: string
  recipientContextId: string
  dropped: number
}
/** One notification, as `a2a.events.wait` returns them. */
export type A2AEvent =
  | { method: 'a2a.task.event'; params: TaskEventParams }
  | { method: 'a2a.push'; params: PushParams }
  | { method: 'a2a.lagged'; params: LaggedParams }

// ---- errors ----

export type A2AErrorCode =
  | 'A2A_UNKNOWN_TOKEN'
  | 'A2A_UNKNOWN_AGENT'
  | 'A2A_UNKNOWN_TASK'
  | 'A2A_CROSS_CONTEXT_DENIED'
  | 'A2A_INVALID_TRANSITION'
  | 'A2A_TASK_TERMINAL'
  | 'A2A_SEND_CAP'
  | 'A2A_NO_PEERS'
  | 'A2A_PAYLOAD_TOO_LARGE'

export type ErrorKind =
  | 'rpc'
  | 'io'
  | 'closed'
  | 'timeout'
  | 'frame_too_large'
  | 'protocol'
  | 'deregistered'
  | 'would_deadlock'
  | 'invalid_params'
  | 'internal'

/** What every rejection is. */
export interface A2AError extends Error {
  /** The JSON-RPC code (1400 for A2A errors, -32602 for bad arguments, …)
   * when there is one, else the kind. */
  code: number | ErrorKind
  kind: ErrorKind
  /** `data.errorCode` of an A2A (1400) error. */
  errorCode?: A2AErrorCode
  /** The broker's `data` object. */
  data?: Record<string, unknown>
}

// ---- the API ----

export interface ConnectOptions {
  /** The broker's `serve --socket` NAME (in $XDG_RUNTIME_DIR/a2a-broker/, else
   * /tmp/a2a-broker-UID/), or its socket's path. */
  socket: string
  /** Default: A2A_BROKER_SECRET, else the file the broker wrote beside the socket. */
  secret?: string
  /** Ask for a shared-memory event ring of this many bytes (the broker may decline). */
  eventRing?: number
  callTimeoutSeconds?: number
}

export interface SpawnOptions {
  /** The broker's SQLite database file. */
  db: string
  /** Socket path (default: a fresh temporary directory). */
  socket?: string
  /** The a2a-broker binary (default: $A2A_BROKER_BIN, next to the addon, PATH). */
  bin?: string
  readyTimeoutSeconds?: number
  eventRing?: number
}

export interface RegisterOptions {
  contextId: string
  card: AgentCardInput
  /** `push` (default): events arrive on this connection; `pull`: through `wait`. */
  delivery?: 'push' | 'pull'
}

/** The part of Node's `ChildProcess` a spawned broker exposes here (typed
 * structurally, so these types need no `@types/node`). */
export interface BrokerProcess {
  readonly pid?: number
  readonly exitCode: number | null
  kill(signal?: string | number): boolean
}

export declare class Broker {
  static connect(options: ConnectOptions): Promise<Broker>
  /** Runs a2a-broker, waits for its ready line, connects; the child exits with this process. */
  static spawn(options: SpawnOptions): Promise<Broker>
  readonly usesEventRing: boolean
  readonly handshake: Record<string, unknown>
  /** The spawned broker process (`Broker.spawn` only; a `ChildProcess`). */
  readonly process: BrokerProcess | null
  register(options: RegisterOptions): Promise<Agent>
  /** Closes the connection (and stops a spawned broker). */
  close(): Promise<void>
}

export interface TaskQuery {
  role?: 'worker' | 'requester' | 'any'
  state?: TaskState
  limit?: number
  cursor?: string
}

/** The second argument of a `serve` handler. */
export interface Turn {
  taskId: string
  /** Aborted when the task is canceled (or ends otherwise) under the handler. */
  signal: AbortSignal
  /** A `working` status with this message. */
  progress(message: string | Omit<Message, 'role' | 'messageId'>): Promise<Task>
  /** Adds an artifact (`artifactId` minted when absent). */
  artifact(
    artifact: Omit<Artifact, 'artifactId'> & { artifactId?: string },
    options?: { append?: boolean; lastChunk?: boolean },
  ): Promise<Task>
  /** Moves the task to `input-required` with this question; resolves with the requester's answer. */
  ask(message: string | Omit<Message, 'role' | 'messageId'>): Promise<Message>
}

export type ServeHandler = (
  task: Task,
  turn: Turn,
) => Promise<string | Omit<Message, 'role' | 'messageId'> | void> | string | void

/** The arguments of the A2A tool (one flat object; `action` says which of the eight). */
export interface A2AToolParams {
  action: 'discover' | 'send' | 'get' | 'wait' | 'complete' | 'cancel' | 'lease' | 'release'
  /** send: the peer to give a new task. */
  to?: string
  /** send: the task or message; complete: the result, question or reason; cancel: a reason. */
  text?: string
  /** send (on an existing task), get, complete, cancel. */
  taskId?: string
  /** wait: 0..120, default 30; lease: how long to wait for a conflicting lease (default 0). */
  timeoutSeconds?: number
  /** complete: default `completed`. */
  state?: 'completed' | 'input-required' | 'failed' | 'rejected'
  /** complete: the text of a result artifact, and its name (default "result"). */
  artifact?: string
  artifactName?: string
  /** lease: the files to reserve. */
  paths?: string[]
  /** lease: default 600. */
  ttlSeconds?: number
  /** lease: default true. */
  exclusive?: boolean
  /** release: the id lease gave. */
  leaseId?: string
}

/** One update a `wait` returned. */
export interface A2AToolEvent {
  taskId: string
  state: TaskState
  from: string
  text: string
  artifact?: { name: string; text: string }
}

/** The structured result of a call (the fields of its action), plus `isError`. */
export interface A2AToolDetails {
  peers?: { name: string; description: string; kind: 'subagent' | 'parent'; skills: AgentSkill[] }[]
  taskId?: string
  state?: TaskState
  requester?: string
  worker?: string
  history?: { from: string; text: string }[]
  artifacts?: { name: string; text: string }[]
  events?: A2AToolEvent[]
  dropped?: number
  leaseId?: string
  paths?: string[]
  exclusive?: boolean
  expiresAt?: string
  released?: boolean
  /** A lease conflict (`lease-conflict`) adds `holder`, `leaseId` and `paths`. */
  error?: { code: string; message: string; holder?: string; leaseId?: string; paths?: string[] }
  isError: boolean
}

/** What `execute` resolves with (the Pi agent runtime's `AgentToolResult`). */
export interface A2AToolResult {
  content: { type: 'text'; text: string }[]
  details: A2AToolDetails
}

export interface A2AToolOptions {
  /** The Pi runtime's `label` (default: the tool's title). */
  label?: string
  /** Messages this agent may put on one task (default 12). */
  turnCap?: number
  /** `throw` (default): a tool error rejects `execute` with an Error whose message is the
   * text for the model (and `details`); `return`: it resolves, with `details.isError`. */
  errors?: 'throw' | 'return'
}

/** The A2A tool in the Pi agent runtime's shape (`AgentTool`). */
export interface A2ATool {
  readonly name: 'A2A'
  readonly label: string
  readonly description: string
  /** JSON Schema of `A2AToolParams`. */
  readonly parameters: Record<string, unknown>
  /** JSON Schema of the structured result. */
  readonly outputSchema: Record<string, unknown>
  /** The abort signal ends a `wait` early; `onUpdate` hears about every second of a `wait`. */
  execute(
    toolCallId: string,
    params: A2AToolParams,
    signal?: AbortSignal,
    onUpdate?: (partial: A2AToolResult) => void,
  ): Promise<A2AToolResult>
  /** One call as the session answers it, errors included (for other runtimes). */
  call(
    params: A2AToolParams,
    signal?: AbortSignal,
  ): Promise<{ text: string; structured: Omit<A2AToolDetails, 'isError'>; isError: boolean }>
}

export declare class Agent {
  readonly id: string
  readonly contextId: string
  readonly card: AgentCard
  readonly delivery: 'push' | 'pull'
  readonly deregistered: boolean
  /** `a2a.message.send`; with `message.to === "*"`, one task per peer. */
  send(params: { message: Message & { to: '*' }; configuration?: SendConfiguration }): Promise<Task[]>
  send(params: { message: Message; configuration?: SendConfiguration }): Promise<Task>
  stream(params: { message: Message }): Promise<Task>
  get(params: { id: string; historyLength?: number }): Promise<Task>
  status(params: { id: string; state: TaskState; message?: Message }): Promise<Task>
  artifact(params: { id: string; artifact: Artifact; append?: boolean; lastChunk?: boolean }): Promise<Task>
  cancel(params: { id: string; message?: Message }): Promise<Task>
  resubscribe(params: { id: string; afterVersion?: number }): Promise<Task>
  setPush(params: { taskId: string; config: PushConfig }): Promise<PushConfig>
  getPush(params: { taskId: string }): Promise<PushConfig | null>
  /** `a2a.agents.list`: the cards this agent may address. */
  list(params?: { skill?: string }): Promise<AgentCard[]>
  /** `a2a.tasks.list` (ext). */
  listTasks(query?: TaskQuery): Promise<{ tasks: Task[]; nextCursor?: string }>
  /**
   * Any agent method of the protocol by its wire name (`a2a.leases.renew`),
   * as this agent: the token is filled in; resolves with the method's whole
   * result as docs/protocol.md writes it (every method of the broker's
   * method table, typed method or not).
   */
  request(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>
  /** `a2a.leases.acquire` (ext): a lease on `paths` (relative, `/`-separated; a trailing `/`
   * covers a directory, `*` and `**` match). A conflict rejects with `errorCode`
   * `A2A_LEASE_CONFLICT` and `data` (`LeaseConflictData`). */
  lease(paths: string[], options: LeaseOptions): Promise<Lease>
  /** `a2a.leases.list` (ext): the leases live in this agent's context (those overlapping `path`). */
  leases(params?: { path?: string }): Promise<LeaseInfo[]>
  deregister(): Promise<void>
  /** Queued events, else the first within `timeoutSeconds` (default 0) and those behind it; `[]` on timeout. */
  wait(options?: { timeoutSeconds?: number }): Promise<A2AEvent[]>
  /** Every event from now on (queued ones first), also the status updates `delegate` and `serve`
   * act on; `null` stops. Does not keep the process alive.
   * A busy stream is delivered in batches at most every 500 µs (`A2A_NODE_EVENT_PACE_US`; `0`: at once);
   * an event after a quiet spell is delivered at once. */
  onEvent(callback: ((event: A2AEvent) => void) | null): void
  /** Sends and resolves with the task once it is terminal or needs input. */
  delegate(params: { to?: string; message: string | Message; timeoutSeconds?: number }): Promise<Task>
  /** Serves every task addressed to this agent until `deregister` (then resolves). */
  serve(handler: ServeHandler): Promise<void>
  /** The A2A tool bound to this agent (its token stays native), in the Pi agent runtime's
   * shape. Its `wait` reads this agent's event queue: do not combine it with `onEvent`,
   * `serve` or `delegate` on the same agent. */
  tool(options?: A2AToolOptions): A2ATool
}

// ---- leases (ext; docs/protocol.md, Leases) ----

export interface LeaseOptions {
  /** How long the lease lasts unless renewed or released (at least 1). */
  ttlSeconds: number
  /** Default true; shared leases (false) coexist with each other. */
  exclusive?: boolean
  reason?: string
  /** Park up to this long for a conflicting lease to end (a parked wait). */
  waitSeconds?: number
}

/** A lease as the broker answers it. */
export interface LeaseInfo {
  id: string
  paths: string[]
  /** The holder's name. */
  holder: string
  exclusive: boolean
  /** RFC 3339 UTC. */
  expiresAt: string
  reason?: string
}

/** `data` of an `A2A_LEASE_CONFLICT` rejection (code 1400). */
export interface LeaseConflictData {
  errorCode: 'A2A_LEASE_CONFLICT'
  /** The name of the agent holding the conflicting lease. */
  holder: string
  leaseId: string
  /** Its paths that overlap the ones asked for. */
  paths: string[]
}

/** A lease this agent holds (`agent.lease`). */
export declare class Lease implements LeaseInfo {
  readonly id: string
  readonly paths: string[]
  readonly holder: string
  readonly exclusive: boolean
  /** Updated by `renew`. */
  readonly expiresAt: string
  readonly reason?: string
  /** Has `release` (or `dispose`) succeeded? */
  readonly released: boolean
  /** `a2a.leases.renew`: a new TTL from now. */
  renew(ttlSeconds: number): Promise<Lease>
  /** `a2a.leases.release` (idempotent for its holder). */
  release(): Promise<void>
  /** Releases unless released; a lease the broker already ended is not an error.
   * Also `[Symbol.asyncDispose]` where the runtime has it (`await using`). */
  dispose(): Promise<void>
}

/** A message of one text part with a fresh `messageId`. */
export declare function textMessage(text: string, fields?: Partial<Message>): Message
/** The text parts of a message, joined. */
export declare function textOf(message: Message | undefined): string
export declare const TERMINAL_STATES: ReadonlySet<TaskState>
/** Decodes a compact event batch (what the addon's native event callback
 * and `wait` hand to this layer; exported for benchmarks). */
export declare function decodeCompact(batch: string): A2AEvent[]
