//! `a2a-broker mcp` (a module of the binary): the A2A tool (`a2a-tool`)
//! served to any MCP host over stdio, with `rmcp`, the official Rust MCP
//! SDK. One process is one agent: it registers `--as NAME` on a running
//! broker's socket at start (the secret from `A2A_BROKER_SECRET` or the
//! file beside the socket, as `call` finds it), serves `tools/list` and
//! `tools/call` for the one tool `A2A` (with its `outputSchema`; results
//! carry the text for the model as content and the structured value as
//! `structuredContent`), and deregisters when the host closes its stdin.
//! The token stays in this process: the host and the model never see it.

use a2a_broker::transport::socket::socket_path;
use a2a_client::proto::types::AgentKind;
use a2a_client::{read_secret, Client};
use a2a_tool::{schema, Registration, Session, SessionOptions, WaitControl};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, RequestParamsMeta,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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
}

/// Registers the agent, serves MCP on stdin/stdout until stdin closes,
/// deregisters; `Err` is the line to print.
pub fn run(o: Options) -> Result<(), String> {
    let path = socket_path(&o.socket);
    let secret = read_secret(&path).map_err(|e| {
        format!(
            "no secret for {}: set A2A_BROKER_SECRET or make {} readable ({e})",
            path.display(),
            a2a_client::secret_file(&path).display()
        )
    })?;
    let client = Client::connect(&path, secret.trim())
        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
    let reg = Registration {
        context_id: o
            .context_id
            .unwrap_or_else(|| format!("mcp-{}", o.as_agent)),
        name: o.as_agent.clone(),
        description: o.description.unwrap_or_default(),
        kind: o.parent.then_some(AgentKind::Parent),
    };
    let session = Session::register(&client, &reg, SessionOptions::default())
        .map_err(|e| format!("cannot register {}: {e}", o.as_agent))?;
    eprintln!(
        "a2a-broker mcp: serving the A2A tool on stdio as agent {} (context {}) of {}",
        session.agent().id(),
        session.agent().context_id(),
        path.display()
    );
    let session = Arc::new(session);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let served = runtime.block_on(async {
        let server = Server {
            session: session.clone(),
            tool: tool(),
        };
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("MCP initialization failed: {e}"))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| format!("MCP service failed: {e}"))
    });
    // The host closed stdin (or the session failed): the agent leaves the
    // broker, which fails the tasks it serves and cancels those it asked for.
    let _ = session.agent().deregister();
    served
}

/// The tool as MCP lists it: the one definition's name, description and
/// schemas.
fn tool() -> Tool {
    let object = |v: Value| match v {
        Value::Object(m) => Arc::new(m),
        _ => unreachable!("the schemas are objects"),
    };
    Tool::new(
        schema::NAME,
        schema::description(),
        object(schema::input_schema()),
    )
    .with_title(schema::TITLE)
    .with_raw_output_schema(object(schema::output_schema()))
}

struct Server {
    session: Arc<Session>,
    tool: Tool,
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
            .with_instructions(
                "The A2A tool lets you delegate work to other agents on this machine and serve \
                 the tasks they give you. Start with {\"action\": \"discover\"} or \
                 {\"action\": \"wait\"}.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != schema::NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`: this server has one tool, `{}`",
                    request.name,
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
        let session = self.session.clone();
        // The session blocks (a `wait` up to 120 s): off the runtime's threads.
        let r = tokio::task::spawn_blocking(move || session.call_with(&args, &control))
            .await
            .map_err(|e| McpError::internal_error(format!("the tool call failed: {e}"), None))?;
        let mut result = if r.is_error {
            CallToolResult::error(vec![ContentBlock::text(r.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(r.text)])
        };
        result.structured_content = Some(r.structured);
        Ok(result.into())
    }
}
