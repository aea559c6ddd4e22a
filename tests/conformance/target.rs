//! Where a case runs: the CRD served directly by the provider (the
//! reference), the same resource served by bindery to a consumer, or served
//! through an app cluster's aggregator. Each step becomes one normalized
//! text, so the runs can be compared line by line.

use crate::case::Step;
use crate::fixture::kubectl_path;
use crate::normalize;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One identity a step can act as: a kubeconfig for kubectl and a client
/// for raw requests.
pub struct Actor {
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
}

/// A target acts as its consumer, or (for steps with `as: other`) as a second
/// consumer whose objects must stay invisible: directly, that is a separate
/// cluster serving the same CRD; through bindery (directly or aggregated), a
/// second consumer bound to the same provider CRD by its own export.
pub struct Target {
    pub name: &'static str,
    pub main: Actor,
    pub other: Actor,
}

pub type Vars = BTreeMap<String, String>;

impl Target {
    /// Runs one step and returns its normalized output.
    pub async fn run(&self, step: &Step, vars: &mut Vars) -> String {
        let actor = match step.actor.as_deref() {
            None => &self.main,
            Some("other") => &self.other,
            Some(unknown) => return format!("error: unknown actor {unknown:?}"),
        };
        if step.kubectl.is_some() || step.args.is_some() {
            return actor.kubectl(step, vars);
        }
        // The step's own text (before variables) heads its output: the
        // values differ between targets, the requests do not.
        if let Some(line) = &step.http {
            let head = line.clone();
            let line = substitute(line, vars);
            if let Some(("GET", path)) = line.split_once(' ') {
                actor.catch_up_before_any_version_read(path).await;
            }
            return actor.http(step, &line, &head, vars).await;
        }
        if let Some(path) = &step.watch {
            let head = format!("WATCH {path}");
            actor
                .catch_up_before_any_version_read(&substitute(path, vars))
                .await;
            return self
                .watch(actor, step, &substitute(path, vars), &head, vars)
                .await;
        }
        "error: a step needs kubectl, args, http or watch".into()
    }

    async fn watch(
        &self,
        actor: &Actor,
        step: &Step,
        path: &str,
        head: &str,
        vars: &mut Vars,
    ) -> String {
        let response = match actor
            .client
            .send(actor.request("GET", path, step, vars))
            .await
        {
            Ok(response) => response,
            Err(e) => return format!("{head}\ntransport error: {e}"),
        };
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let frames = content_type.starts_with(bindery::wire::protobuf::MEDIA_TYPE);
        let mut out = format!("{head}\nstatus: {status}\ncontent-type: {content_type}\n");
        let mut during = Vec::new();
        for inner in &step.during {
            during.push(Box::pin(self.run(inner, vars)).await);
        }
        let want = step.events.unwrap_or(usize::MAX);
        let mut body = response.into_body().into_data_stream();
        let mut pending = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while events.len() < want {
            let next = tokio::time::timeout_at(deadline, body.next()).await;
            let Ok(Some(Ok(chunk))) = next else { break };
            let chunk: Bytes = chunk;
            pending.extend_from_slice(&chunk);
            if frames {
                let mut stream = bytes::BytesMut::from(&pending[..]);
                match bindery::wire::protobuf::decode_watch_frames(&mut stream) {
                    Ok(decoded) => {
                        for event in decoded {
                            let line = event.to_string();
                            events.push(render_body(
                                line.as_bytes(),
                                &BTreeMap::new(),
                                &mut Vars::new(),
                            ));
                        }
                        pending = stream.to_vec();
                    }
                    Err(e) => {
                        events.push(format!("undecodable protobuf frame: {e}"));
                        break;
                    }
                }
                continue;
            }
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if !line.trim_ascii().is_empty() {
                    events.push(render_body(&line, &BTreeMap::new(), &mut Vars::new()));
                }
            }
        }
        for (i, text) in during.iter().enumerate() {
            out.push_str(&format!("--- during step {i}\n{text}\n"));
        }
        for (i, event) in events.iter().enumerate() {
            out.push_str(&format!("--- event {i}\n{event}\n"));
        }
        out
    }
}

impl Actor {
    /// A read at any version (`resourceVersion=0`) may be answered by a
    /// watch cache that has not yet seen the case's last write; that is
    /// what "any" allows, and kube-apiserver's own cache lags that way now
    /// and then. Before such a read, a consistent list of the same
    /// collection (not compared) makes the target's cache catch up to its
    /// storage, so both targets answer from the same state.
    async fn catch_up_before_any_version_read(&self, path: &str) {
        let Some((collection, query)) = path.split_once('?') else {
            return;
        };
        if !query.split('&').any(|pair| pair == "resourceVersion=0") {
            return;
        }
        let request = http::Request::builder()
            .uri(collection)
            .body(kube::client::Body::from(Vec::new()))
            .expect("a valid request");
        if let Ok(response) = self.client.send(request).await {
            let _ = response.into_body().collect().await;
        }
    }

    fn kubectl(&self, step: &Step, vars: &Vars) -> String {
        let mut args: Vec<String> = match (&step.args, &step.kubectl) {
            (Some(args), _) => args.clone(),
            (None, Some(line)) => line.split_whitespace().map(str::to_string).collect(),
            (None, None) => Vec::new(),
        };
        args = args.iter().map(|a| substitute(a, vars)).collect();
        let mut command = Command::new(kubectl_path());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(&args)
            .stdin(if step.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return format!("cannot run kubectl: {e}"),
        };
        if let Some(input) = &step.stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().expect("stdin is piped");
            let _ = pipe.write_all(substitute(input, vars).as_bytes());
        }
        let output = child.wait_with_output().expect("kubectl finishes");
        format!(
            "$ kubectl {}\nexit: {}\n--- stdout\n{}\n--- stderr\n{}",
            args.join(" "),
            output.status.code().unwrap_or(-1),
            normalize::text(&String::from_utf8_lossy(&output.stdout)),
            normalize::text(&String::from_utf8_lossy(&output.stderr)),
        )
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        step: &Step,
        vars: &Vars,
    ) -> http::Request<kube::client::Body> {
        let mut builder = http::Request::builder().method(method).uri(path);
        for (name, value) in &step.headers {
            builder = builder.header(name, substitute(value, vars));
        }
        let body = match &step.body {
            None if step.body_base64.is_some() => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(step.body_base64.as_deref().unwrap_or_default())
                    .expect("body_base64 is base64")
            }
            None => Vec::new(),
            Some(serde_norway::Value::String(text)) => substitute(text, vars).into_bytes(),
            Some(value) => {
                let json = serde_json::to_string(value).expect("YAML body converts to JSON");
                substitute(&json, vars).into_bytes()
            }
        };
        builder
            .body(kube::client::Body::from(body))
            .expect("a valid request")
    }

    async fn http(&self, step: &Step, line: &str, head: &str, vars: &mut Vars) -> String {
        let (method, path) = line.split_once(' ').unwrap_or(("GET", line));
        let response = match self
            .client
            .send(self.request(method, path, step, vars))
            .await
        {
            Ok(response) => response,
            Err(e) => return format!("{head}\ntransport error: {e}"),
        };
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let cache_control: Vec<&str> = response
            .headers()
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let cache_control = cache_control.join(", ");
        let named = |name: http::header::HeaderName| -> String {
            let values: Vec<&str> = response
                .headers()
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            values.join(", ")
        };
        let (content_encoding, vary) = (
            named(http::header::CONTENT_ENCODING),
            named(http::header::VARY),
        );
        let warnings: Vec<String> = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok().map(normalize::text))
            .collect();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = readable(&content_type, &decoded(&content_encoding, &body));
        format!(
            "{head}\nstatus: {status}\ncontent-type: {content_type}\ncontent-encoding: {content_encoding}\nvary: {vary}\ncache-control: {cache_control}\nwarnings: {warnings:?}\n{}",
            render_body(&body, &step.capture, vars)
        )
    }
}

/// A body as it was before its content encoding (gzip, the only one
/// kube-apiserver uses).
fn decoded(content_encoding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    match content_encoding {
        "" => body.to_vec(),
        "gzip" => {
            let mut out = Vec::new();
            match flate2::read::GzDecoder::new(body).read_to_end(&mut out) {
                Ok(_) => out,
                Err(e) => format!("undecodable gzip: {e}").into_bytes(),
            }
        }
        other => format!("unknown content encoding {other}").into_bytes(),
    }
}

/// A body as JSON text: protobuf decoded to the JSON kube-apiserver would
/// write for it (so the same object compares alike in either), anything
/// else as it came.
fn readable(content_type: &str, body: &[u8]) -> Vec<u8> {
    if content_type.starts_with(bindery::wire::protobuf::MEDIA_TYPE) {
        return match bindery::wire::protobuf::decode(body) {
            Ok(value) => value.to_string().into_bytes(),
            Err(e) => format!("undecodable protobuf: {e}").into_bytes(),
        };
    }
    body.to_vec()
}

/// A body as normalized, pretty JSON (or normalized text), capturing variables.
fn render_body(body: &[u8], capture: &BTreeMap<String, String>, vars: &mut Vars) -> String {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut value) => {
            for (name, path) in capture {
                let found = path.split('.').try_fold(&value, |v, key| v.get(key));
                if let Some(found) = found {
                    let text = found
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| found.to_string());
                    vars.insert(name.clone(), text);
                }
            }
            normalize::json(&mut value);
            serde_json::to_string_pretty(&value).expect("JSON serializes")
        }
        Err(_) => normalize::text(&String::from_utf8_lossy(body)),
    }
}

/// Replaces `{{name}}` with the variable's value, and `{{repeat:N:text}}`
/// with `text` N times (for bodies too large to write out).
fn substitute(text: &str, vars: &Vars) -> String {
    let mut out = text.to_string();
    while let Some(start) = out.find("{{repeat:") {
        let Some(length) = out[start..].find("}}") else {
            break;
        };
        let spec = &out[start + "{{repeat:".len()..start + length];
        let (count, unit) = spec.split_once(':').expect("{{repeat:N:text}}");
        let count: usize = count.parse().expect("{{repeat:N:text}} with N a number");
        out.replace_range(start..start + length + 2, &unit.repeat(count));
    }
    for (name, value) in vars {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    out
}
