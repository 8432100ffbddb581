//! `a2a-broker mcp` (a module of the binary): the A2A tool (`a2a-tool`)
//! served to any MCP host over stdio, with `rmcp`, the official Rust MCP
//! SDK. One process is one agent: it registers `--as NAME` on a running
//! broker's socket at start (found through the client's locator, as `call`
//! finds it, waiting up to `--wait` seconds for one to listen), serves
//! `tools/list` and `tools/call` for the one tool `A2A` (with its
//! `outputSchema`; results carry the text for the model as content and the
//! structured value as `structuredContent`), and deregisters when the host
//! closes its stdin. The token stays in this process: the host and the
//! model never see it.
//!
//! - `stdio`: the host's lines checked before `rmcp` reads them (a line
//!   that is not JSON is answered with -32700), stdout written line by line.
//! - `link`: the session on the broker, registered again under the same
//!   name when the connection is lost (the broker restarted).
//!
//! The model is told the name it is registered under (the broker adds a
//! suffix when another live agent holds the one asked for): in the server's
//! instructions, in the tool's description, in the first result and in
//! every `discover` result.

mod link;
mod stdio;

use a2a_client::proto::types::AgentKind;
use a2a_tool::{excerpt, schema, Registration, WaitControl};
use link::Link;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, RequestParamsMeta, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long, at most, the end of the session waits for stdout to take the
/// last lines once `rmcp` has stopped (a host that stopped reading).
const FLUSH_FOR: Duration = Duration::from_secs(5);

/// What `a2a-broker mcp` was asked.
pub struct Options {
    /// `--socket NAME`: a path, or a name as `serve --socket` places it.
    pub socket: String,
    /// `--as AGENT`: the name to register.
    pub as_agent: String,
    /// `--kind`: subagent (default) or parent.
    pub parent: bool,
    /// `--context-id`: default `mcp-AGENT`, so that a restarted server is
    /// the same party and sees its tasks again.
    pub context_id: Option<String>,
    /// `--description`: what peers read in `discover`.
    pub description: Option<String>,
    /// `--wait SECONDS`: how long to wait for a broker to listen at the
    /// socket (so that the host may start this before the broker).
    pub wait: Duration,
}

/// Registers the agent, serves MCP on stdin/stdout until stdin closes,
/// deregisters; `Err` is the line to print.
pub fn run(o: Options) -> Result<(), String> {
    let broker = a2a_client::locate(&o.socket);
    let reg = Registration {
        context_id: o
            .context_id
            .unwrap_or_else(|| format!("mcp-{}", o.as_agent)),
        name: o.as_agent.clone(),
        description: o.description.unwrap_or_default(),
        kind: o.parent.then_some(AgentKind::Parent),
    };
    let socket = broker.socket.clone();
    let link = Arc::new(Link::start(broker, reg, o.wait)?);
    {
        let session = link.session();
        eprintln!(
            "a2a-broker mcp: serving the A2A tool on stdio as agent {} (context {}) of {}",
            session.agent().id(),
            session.agent().context_id(),
            socket.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let served = runtime.block_on(async {
        let io = stdio::start();
        let server = Server {
            link: link.clone(),
            introduced: AtomicBool::new(false),
        };
        let served = match server.serve(io.transport).await {
            Ok(running) => running
                .waiting()
                .await
                .map(|_| ())
                .map_err(|e| format!("MCP service failed: {e}")),
            Err(e) => Err(format!("MCP initialization failed: {e}")),
        };
        // Every answer rmcp wrote reaches the host before the agent leaves.
        let _ = tokio::time::timeout(FLUSH_FOR, io.flushed).await;
        served
    });
    // A read of stdin still under way (a session that failed before the
    // host closed it) is not waited for.
    runtime.shutdown_background();
    // The host closed stdin (or the session failed): the agent leaves the
    // broker, which fails the tasks it serves and cancels those it asked for.
    let _ = link.session().agent().deregister();
    served
}

/// The tool as MCP lists it: the one definition's name, description and
/// schemas, and the name this agent is registered under.
fn tool(link: &Link) -> Tool {
    let object = |v: Value| match v {
        Value::Object(m) => Arc::new(m),
        _ => unreachable!("the schemas are objects"),
    };
    Tool::new(
        schema::NAME,
        format!("{}\n\n{}", schema::description(), you_are(link)),
        object(schema::input_schema()),
    )
    .with_title(schema::TITLE)
    .with_raw_output_schema(object(schema::output_schema()))
}

/// The sentence that tells the model its name.
fn you_are(link: &Link) -> String {
    let session = link.session();
    let agent = session.agent();
    let name = agent.id();
    let mut t = format!(
        "You are agent \"{name}\" on the A2A broker (context {}): peers send you tasks under that name.",
        agent.context_id()
    );
    if name != link.asked() {
        t.push_str(&format!(
            " (The name {} was asked for, but another live agent holds it.)",
            excerpt(link.asked())
        ));
    }
    t
}

struct Server {
    link: Arc<Link>,
    /// Has a result told the model its name yet?
    introduced: AtomicBool,
}

/// A `wait` under MCP: ends early when the host cancels the request
/// (`notifications/cancelled`), and reports progress when the host asked
/// for it (a `progressToken`).
struct Control {
    /// Is the request cancelled? (Reads `rmcp`'s cancellation token.)
    cancelled: Box<dyn Fn() -> bool + Send + Sync>,
    progress: Option<(rmcp::Peer<RoleServer>, rmcp::model::ProgressToken)>,
    runtime: tokio::runtime::Handle,
}

impl WaitControl for Control {
    fn cancelled(&self) -> bool {
        (self.cancelled)()
    }

    fn progress(&self, waited: Duration, limit: Duration) {
        if let Some((peer, token)) = &self.progress {
            let param = ProgressNotificationParam::new(token.clone(), waited.as_secs_f64())
                .with_total(limit.as_secs_f64());
            let peer = peer.clone();
            self.runtime.spawn(async move {
                let _ = peer.notify_progress(param).await;
            });
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("a2a-broker", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The A2A tool lets you delegate work to other agents on this machine and serve \
                 the tasks they give you. {} Start with {{\"action\": \"discover\"}} or \
                 {{\"action\": \"wait\"}}.",
                you_are(&self.link)
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![tool(&self.link)]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != schema::NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {}: this server has one tool, `{}`",
                    excerpt(&request.name),
                    schema::NAME
                ),
                None,
            ));
        }
        // rmcp hands the request's `_meta` over in the context.
        let progress = request
            .progress_token()
            .or_else(|| context.meta.get_progress_token())
            .map(|t| (context.peer.clone(), t));
        let args = Value::Object(request.arguments.unwrap_or_default());
        let ct = context.ct.clone();
        let control = Control {
            cancelled: Box::new(move || ct.is_cancelled()),
            progress,
            runtime: tokio::runtime::Handle::current(),
        };
        let link = self.link.clone();
        let action = args
            .get("action")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // The session blocks (a `wait` up to 120 s): off the runtime's threads.
        let r = tokio::task::spawn_blocking(move || link.call(&args, &control))
            .await
            .map_err(|e| McpError::internal_error(format!("the tool call failed: {e}"), None))?;
        let first = !self.introduced.swap(true, Ordering::AcqRel);
        let text = if first || action.as_deref() == Some("discover") {
            format!("{}\n\n{}", you_are(&self.link), r.text)
        } else {
            r.text
        };
        let mut result = if r.is_error {
            CallToolResult::error(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text)])
        };
        result.structured_content = Some(r.structured);
        Ok(result.into())
    }

    /// `rmcp` hands over, as a request it does not know, a request for a
    /// method it knows whose params do not have that method's shape (e.g.
    /// `tools/call` with `arguments` an array): those are invalid params
    /// (-32602), as a host expects, and only other methods are not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method = request.method.as_str();
        if !SERVED.contains(&method) {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {}", excerpt(method)),
                None,
            ));
        }
        let why = match (method, &request.params) {
            ("tools/call", Some(Value::Object(p))) => match (p.get("name"), p.get("arguments")) {
                (Some(Value::String(_)), None | Some(Value::Object(_) | Value::Null)) => {
                    "they do not have the shape MCP gives them".to_string()
                }
                (Some(Value::String(_)), Some(_)) => format!(
                    "`arguments` must be a JSON object, e.g. {{\"action\": \"discover\"}} (the {} tool's input schema)",
                    schema::NAME
                ),
                _ => "`name` must be a string: the tool's name".to_string(),
            },
            (_, Some(Value::Object(_)) | None) => {
                "they do not have the shape MCP gives them".to_string()
            }
            _ => "params must be a JSON object".to_string(),
        };
        Err(McpError::invalid_params(
            format!("invalid params for {method}: {why}"),
            None,
        ))
    }
}

/// The methods this server serves (their params, when `rmcp` cannot read
/// them, are invalid params rather than an unknown method).
const SERVED: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];
