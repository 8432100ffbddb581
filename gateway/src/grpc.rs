//! The gRPC binding of A2A v1.0: `lf.a2a.v1.A2AService` (a2a-grpc's
//! generated tonic server) on the gateway's own port, beside the JSON-RPC
//! routes (one hyper server: HTTP/2 with prior knowledge for gRPC, HTTP/1.1
//! or HTTP/2 for the rest).
//!
//! One mapping, more framings: each rpc's request becomes the JSON-RPC
//! params it stands for (ProtoJSON, through a2a-grpc's pbjson impls) and
//! goes through the JSON-RPC handler itself (`http::jsonrpc::handle`), so
//! the operation, its checks (version, extensions, capabilities), its
//! errors and its audit line are the JSON-RPC method's. Its answer, a JSON
//! body or an SSE stream of JSON-RPC responses, is read back into the
//! message (or stream of messages) of the rpc; a JSON-RPC error becomes the
//! gRPC status of A2A's error mapping, with its `ErrorInfo` in the details.
//!
//! The agent is the request's `tenant`: the card of agent X declares its
//! gRPC interface with `tenant` X (`http::card::grpc_interface`), which the specification makes clients
//! send in every request. With one agent exposed, an empty tenant is that
//! agent. The bearer token is the `authorization` metadata, as the
//! JSON-RPC binding's header; the rate limit is the same one.

use crate::http::{jsonrpc, App};
use crate::security::audit_refusal;
use a2a_grpc::status;
use a2a_grpc::v1::{self, a2a_service_server};
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::pin::Pin;
use std::sync::Arc;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

/// The gRPC routes, to merge with the HTTP router.
pub fn router(app: Arc<App>) -> axum::Router {
    let max = app.config.max_body_bytes;
    let svc = a2a_service_server::A2aServiceServer::new(Grpc { app })
        .max_decoding_message_size(max)
        .max_encoding_message_size(usize::MAX);
    // Under the service's own path only: tonic's router would bring a
    // fallback of its own, and the HTTP router has one.
    let path = format!(
        "/{}/{{*rpc}}",
        <Server as tonic::server::NamedService>::NAME
    );
    axum::Router::new().route_service(&path, svc)
}

type Server = a2a_service_server::A2aServiceServer<Grpc>;

/// The stream of a streaming rpc.
pub type Events = Pin<Box<dyn Stream<Item = Result<v1::StreamResponse, Status>> + Send>>;

struct Grpc {
    app: Arc<App>,
}

/// Who calls, and which agent.
struct Caller {
    identity: String,
    agent: String,
}

/// Metadata passed on to the JSON-RPC handler as the headers it reads.
const PASSED_ON: [&str; 2] = ["a2a-version", "a2a-extensions"];

impl Grpc {
    /// The caller's identity (bearer token) and agent (`tenant`), after the
    /// same refusals, with the same audit lines, as a JSON-RPC POST.
    fn caller(&self, meta: &MetadataMap, tenant: &str) -> Result<Caller, Status> {
        let config = &self.app.config;
        let auth = meta.get("authorization").and_then(|v| v.to_str().ok());
        let Some(identity) = config.tokens.identify(auth) else {
            let why = if auth.is_some() {
                "bad credentials"
            } else {
                "no credentials"
            };
            audit_refusal(&config.audit, None, tenant, 401, why);
            return Err(Status::unauthenticated(why));
        };
        if config.limiter.check(&identity).is_err() {
            audit_refusal(&config.audit, Some(&identity), tenant, 429, "rate limit");
            return Err(Status::resource_exhausted("rate limit"));
        }
        let exposed = self.app.core.exposed();
        let agent = match (tenant, exposed) {
            ("", [only]) => only.name.clone(),
            ("", _) => {
                return Err(Status::invalid_argument(
                    "tenant must name the agent (its card's GRPC interface states it)",
                ))
            }
            (t, _) if self.app.core.agent(t).is_some() => t.to_owned(),
            (t, _) => {
                audit_refusal(&config.audit, Some(&identity), t, 404, "no such agent");
                return Err(Status::not_found(format!("no agent `{t}` here")));
            }
        };
        Ok(Caller { identity, agent })
    }

    /// Calls `method` through the JSON-RPC handler with `request` as its
    /// params (its `tenant` left out: it named the agent).
    async fn handle<T: Serialize>(
        &self,
        meta: &MetadataMap,
        tenant: &str,
        method: &str,
        request: &T,
    ) -> Result<axum::response::Response, Status> {
        let caller = self.caller(meta, tenant)?;
        let mut params = a2a_grpc::json::to_value(request)
            .map_err(|e| Status::invalid_argument(format!("request: {e}")))?;
        if let Some(p) = params.as_object_mut() {
            p.remove("tenant");
        }
        let body = serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params
        }))
        .map_err(|e| Status::internal(e.to_string()))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for name in PASSED_ON {
            for v in meta.get_all(name).iter() {
                if let Ok(v) = HeaderValue::from_bytes(v.as_encoded_bytes()) {
                    headers.append(name, v);
                }
            }
        }
        Ok(jsonrpc::handle(
            Arc::clone(&self.app),
            caller.identity,
            caller.agent,
            &headers,
            &body,
        )
        .await)
    }

    /// A unary rpc: the JSON-RPC result read into its response message.
    async fn unary<Q: Serialize, A: DeserializeOwned>(
        &self,
        request: Request<Q>,
        tenant: impl Fn(&Q) -> &str,
        method: &str,
    ) -> Result<Response<A>, Status> {
        let (meta, _, q) = request.into_parts();
        let r = self.handle(&meta, tenant(&q), method, &q).await?;
        let throttled = r.status() == StatusCode::TOO_MANY_REQUESTS;
        let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .map_err(|e| Status::internal(format!("answer: {e}")))?;
        let mut answer: Value =
            serde_json::from_slice(&bytes).map_err(|e| Status::internal(format!("answer: {e}")))?;
        result_of(&mut answer, throttled).map(Response::new)
    }

    /// A streaming rpc: each SSE event's JSON-RPC result, one message each.
    async fn streaming<Q: Serialize>(
        &self,
        request: Request<Q>,
        tenant: impl Fn(&Q) -> &str,
        method: &str,
    ) -> Result<Response<Events>, Status> {
        let (meta, _, q) = request.into_parts();
        let r = self.handle(&meta, tenant(&q), method, &q).await?;
        let is_sse = r
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            // Refused before the stream began: a JSON error body.
            let throttled = r.status() == StatusCode::TOO_MANY_REQUESTS;
            let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
                .await
                .map_err(|e| Status::internal(format!("answer: {e}")))?;
            let mut answer: Value = serde_json::from_slice(&bytes)
                .map_err(|e| Status::internal(format!("answer: {e}")))?;
            return match result_of::<v1::StreamResponse>(&mut answer, throttled) {
                Err(s) => Err(s),
                Ok(one) => Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(
                    one,
                )])))),
            };
        }
        Ok(Response::new(Box::pin(sse_results(r.into_body()))))
    }
}

/// The `result` of a JSON-RPC answer as `T`, or its `error` as a status.
fn result_of<T: DeserializeOwned>(answer: &mut Value, throttled: bool) -> Result<T, Status> {
    if let Some(e) = answer.get("error") {
        return Err(status::from_jsonrpc(e, throttled));
    }
    let result = answer
        .get_mut("result")
        .map(Value::take)
        .ok_or_else(|| Status::internal("an answer with neither result nor error"))?;
    a2a_grpc::json::from_value(result).map_err(|e| Status::internal(format!("result: {e}")))
}

/// The events of an SSE body (`data:` lines of JSON-RPC responses; comment
/// lines, the keep-alives, skipped), each read into a `StreamResponse`.
fn sse_results(body: Body) -> impl Stream<Item = Result<v1::StreamResponse, Status>> + Send {
    struct St {
        chunks: axum::body::BodyDataStream,
        buf: Vec<u8>,
        done: bool,
    }
    let st = St {
        chunks: body.into_data_stream(),
        buf: Vec::new(),
        done: false,
    };
    futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(end) = find_event_end(&st.buf) {
                let block: Vec<u8> = st.buf.drain(..end.0 + end.1).collect();
                let text = String::from_utf8_lossy(&block[..end.0]).into_owned();
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                let item = serde_json::from_str::<Value>(&data.join("\n"))
                    .map_err(|e| Status::internal(format!("event: {e}")))
                    .and_then(|mut v| result_of(&mut v, false));
                if item.is_err() {
                    st.done = true;
                }
                return Some((item, st));
            }
            match st.chunks.next().await {
                Some(Ok(c)) => st.buf.extend_from_slice(&c),
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(Status::internal(format!("stream: {e}"))), st));
                }
                None => return None,
            }
        }
    })
}

/// Where the first SSE event of `buf` ends: its length and the length of
/// the blank line that ends it.
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[tonic::async_trait]
impl a2a_service_server::A2aService for Grpc {
    async fn send_message(
        &self,
        r: Request<v1::SendMessageRequest>,
    ) -> Result<Response<v1::SendMessageResponse>, Status> {
        self.unary(r, |q| &q.tenant, "SendMessage").await
    }

    type SendStreamingMessageStream = Events;

    async fn send_streaming_message(
        &self,
        r: Request<v1::SendMessageRequest>,
    ) -> Result<Response<Events>, Status> {
        self.streaming(r, |q| &q.tenant, "SendStreamingMessage")
            .await
    }

    async fn get_task(&self, r: Request<v1::GetTaskRequest>) -> Result<Response<v1::Task>, Status> {
        self.unary(r, |q| &q.tenant, "GetTask").await
    }

    async fn list_tasks(
        &self,
        r: Request<v1::ListTasksRequest>,
    ) -> Result<Response<v1::ListTasksResponse>, Status> {
        self.unary(r, |q| &q.tenant, "ListTasks").await
    }

    async fn cancel_task(
        &self,
        r: Request<v1::CancelTaskRequest>,
    ) -> Result<Response<v1::Task>, Status> {
        self.unary(r, |q| &q.tenant, "CancelTask").await
    }

    type SubscribeToTaskStream = Events;

    async fn subscribe_to_task(
        &self,
        r: Request<v1::SubscribeToTaskRequest>,
    ) -> Result<Response<Events>, Status> {
        self.streaming(r, |q| &q.tenant, "SubscribeToTask").await
    }

    async fn create_task_push_notification_config(
        &self,
        r: Request<v1::TaskPushNotificationConfig>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        self.unary(r, |q| &q.tenant, "CreateTaskPushNotificationConfig")
            .await
    }

    async fn get_task_push_notification_config(
        &self,
        r: Request<v1::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        self.unary(r, |q| &q.tenant, "GetTaskPushNotificationConfig")
            .await
    }

    async fn list_task_push_notification_configs(
        &self,
        r: Request<v1::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<v1::ListTaskPushNotificationConfigsResponse>, Status> {
        self.unary(r, |q| &q.tenant, "ListTaskPushNotificationConfigs")
            .await
    }

    async fn get_extended_agent_card(
        &self,
        r: Request<v1::GetExtendedAgentCardRequest>,
    ) -> Result<Response<v1::AgentCard>, Status> {
        self.unary(r, |q| &q.tenant, "GetExtendedAgentCard").await
    }

    async fn delete_task_push_notification_config(
        &self,
        r: Request<v1::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        // The JSON-RPC result is `{}`, which is Empty's ProtoJSON.
        self.unary(r, |q| &q.tenant, "DeleteTaskPushNotificationConfig")
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_end_at_a_blank_line_of_either_kind() {
        assert_eq!(find_event_end(b"data: {}\n\ndata: x"), Some((8, 2)));
        assert_eq!(find_event_end(b"data: {}\r\n\r\n"), Some((8, 4)));
        assert_eq!(find_event_end(b"data: {}\n"), None);
    }

    #[test]
    fn an_error_answer_is_its_status_and_a_result_its_message() {
        let mut e =
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no task"}});
        let s = result_of::<v1::Task>(&mut e, false).unwrap_err();
        assert_eq!(s.code(), tonic::Code::NotFound);
        let mut ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}});
        let t = result_of::<v1::Task>(&mut ok, false).unwrap();
        assert_eq!(t.status.unwrap().state, v1::TaskState::Working as i32);
        let mut neither = json!({"jsonrpc": "2.0", "id": 1});
        assert_eq!(
            result_of::<v1::Task>(&mut neither, false)
                .unwrap_err()
                .code(),
            tonic::Code::Internal
        );
    }
}
