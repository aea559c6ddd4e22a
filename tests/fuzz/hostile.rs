//! The hostile requests: seeded and reproducible. Each is a method, a path
//! under a door's base, query pairs, headers and a body, drawn from the
//! shapes a hostile consumer (or a confused client) sends: every spelling
//! of a query value, selectors and field selectors naming other consumers'
//! labels and provider namespaces, continue tokens of other doors, foreign
//! resourceVersions, every representation, and bodies only Go reads,
//! duplicate keys, forged identity labels, patches that strip them.

/// A small, seeded PRNG (SplitMix64): the same seed, the same requests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the generator knows of the world, to aim at it.
pub struct Context<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub kind: &'a str,
    /// This door's own name prefix for what it creates.
    pub prefix: &'a str,
    /// Names objects have (or had), of every owner, planted ones included.
    pub names: &'a [String],
    /// Provider namespaces and cluster namespaces of every consumer: the
    /// hostile namespace names.
    pub provider_namespaces: &'a [String],
    /// Identity label values of every export.
    pub identities: &'a [String],
    /// Consumer ids.
    pub consumers: &'a [String],
    /// Continue tokens and resourceVersions seen on any door.
    pub tokens: &'a [String],
    pub versions: &'a [String],
    /// Whether the door takes writes.
    pub writes: bool,
    /// A namespace of 63 characters, the longest there is, that this door
    /// writes in now and then (it exists where the door's reference does).
    pub maximal_namespace: &'a str,
}

/// One request.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: &'static str,
    /// The path below the door's base, with its raw query.
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Whether the answer is a stream (a watch).
    pub watch: bool,
}

const NAMESPACES: &[&str] = &["default", "team", "other"];

const META_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const META_ONE: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const ACCEPTS: &[&str] = &[
    "",
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/vnd.kubernetes.protobuf, application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    META_LIST,
    META_ONE,
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
    "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    "*/*",
    "text/html",
    "application/json;stream=watch",
    "application/json;as=Widget;g=example.com;v=v1",
];

impl Context<'_> {
    /// A namespace to read in: now and then another's provider namespace,
    /// or no namespace name at all.
    fn namespace(&self, rng: &mut Rng) -> String {
        match rng.below(10) {
            0 if !self.provider_namespaces.is_empty() => rng.pick(self.provider_namespaces).clone(),
            1 => {
                let long = "x".repeat(70);
                let hostile = [
                    "kube-system",
                    "Default",
                    "a/b",
                    "..",
                    "%2e%2e",
                    long.as_str(),
                ];
                rng.pick(&hostile).to_string()
            }
            _ => rng.pick(NAMESPACES).to_string(),
        }
    }

    /// A name to write: this door's own, or one any object has had. Never
    /// one spelled after a provider namespace: what the door makes, it
    /// later reads, and that would look like a leak.
    fn write_name(&self, rng: &mut Rng) -> String {
        match rng.below(4) {
            0 if !self.names.is_empty() => rng.pick(self.names).clone(),
            _ => format!("{}{}", self.prefix, rng.below(40)),
        }
    }

    /// A name to read or delete: anyone's, or hostile.
    fn name(&self, rng: &mut Rng) -> String {
        match rng.below(10) {
            0..=5 if !self.names.is_empty() => rng.pick(self.names).clone(),
            6 => format!("{}{}", self.prefix, rng.below(40)),
            7 => rng
                .pick(
                    &[
                        "a%2Fb",
                        "..",
                        "%00",
                        "UPPER",
                        "x.y",
                        "-dash",
                        "\u{e9}t\u{e9}",
                    ]
                    .map(str::to_string),
                )
                .clone(),
            8 if !self.provider_namespaces.is_empty() => {
                format!("{}-{}", rng.pick(self.provider_namespaces), rng.below(5))
            }
            _ => format!("{}{}", self.prefix, rng.below(40)),
        }
    }

    fn label_selector(&self, rng: &mut Rng) -> String {
        let consumer = self
            .consumers
            .get(rng.below(self.consumers.len()))
            .cloned()
            .unwrap_or_default();
        let identity = self
            .identities
            .get(rng.below(self.identities.len()))
            .cloned()
            .unwrap_or_default();
        rng.pick(&[
            format!("bindery.dev/consumer={consumer}"),
            format!("bindery.dev/export={identity}"),
            "bindery.dev/export".to_string(),
            "!bindery.dev/export".to_string(),
            "!bindery.dev/consumer".to_string(),
            format!("bindery.dev/consumer notin ({consumer})"),
            format!("bindery.dev/export in ({identity},x)"),
            "owner=fuzz".to_string(),
            "app notin (x)".to_string(),
            "a=(".to_string(),
            String::new(),
            ",".to_string(),
            "planted=yes".to_string(),
        ])
        .clone()
    }

    fn field_selector(&self, rng: &mut Rng) -> String {
        let namespace = self.namespace(rng);
        let name = self.name(rng);
        rng.pick(&[
            format!("metadata.namespace={namespace}"),
            format!("metadata.namespace!={namespace}"),
            format!("metadata.name={name}"),
            format!("metadata.name={name},metadata.namespace={namespace}"),
            "spec.size=small".to_string(),
            "status.phase=x".to_string(),
            "metadata.name==a".to_string(),
            "bogus".to_string(),
            "metadata.name=a\\,b".to_string(),
        ])
        .clone()
    }

    fn query(&self, rng: &mut Rng, watch: bool) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if watch {
            let spelling = *rng.pick(&["true", "1", "yes", "TRUE", "", "2"]);
            pairs.push(("watch".into(), spelling.into()));
            pairs.push(("timeoutSeconds".into(), "1".into()));
            if rng.chance(40) {
                pairs.push(("resourceVersion".into(), "0".into()));
            }
        }
        for _ in 0..rng.below(5) {
            let (key, value): (&str, String) = match rng.below(24) {
                0 => ("labelSelector", self.label_selector(rng)),
                1 => ("fieldSelector", self.field_selector(rng)),
                2 => (
                    "limit",
                    rng.pick(&["1", "2", "0", "-1", "abc", "", "%2B1"])
                        .to_string(),
                ),
                3 if !self.tokens.is_empty() => ("continue", rng.pick(self.tokens).clone()),
                3 => (
                    "continue",
                    "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4In0".into(),
                ),
                4 if !self.versions.is_empty() => {
                    ("resourceVersion", rng.pick(self.versions).clone())
                }
                4 => ("resourceVersion", "0".into()),
                5 => (
                    "resourceVersion",
                    rng.pick(&["0", "", "1", "abc", "99999999999"]).to_string(),
                ),
                6 => (
                    "resourceVersionMatch",
                    rng.pick(&["Exact", "NotOlderThan", "bogus"]).to_string(),
                ),
                7 => ("watch", rng.pick(&["false", "0", "FALSE"]).to_string()),
                8 => (
                    "includeObject",
                    rng.pick(&["None", "Metadata", "Object", "none"])
                        .to_string(),
                ),
                9 => ("pretty", rng.pick(&["true", "1", "yes"]).to_string()),
                10 => ("dryRun", rng.pick(&["All", "", "bogus"]).to_string()),
                11 => (
                    "fieldManager",
                    rng.pick(&["fuzz", "", "x\u{1}y"]).to_string(),
                ),
                12 => (
                    "fieldValidation",
                    rng.pick(&["Strict", "Warn", "Ignore", "bogus"]).to_string(),
                ),
                13 => ("force", rng.pick(&["true", "false"]).to_string()),
                14 => (
                    "propagationPolicy",
                    rng.pick(&["Foreground", "Background", "Orphan", "x"])
                        .to_string(),
                ),
                15 => ("gracePeriodSeconds", rng.pick(&["0", "1", "x"]).to_string()),
                16 => (
                    "sendInitialEvents",
                    rng.pick(&["true", "false"]).to_string(),
                ),
                17 => ("allowWatchBookmarks", "true".into()),
                18 => ("timeoutSeconds", rng.pick(&["1", "x"]).to_string()),
                19 => ("export", "true".into()),
                20 => ("uid", "not-a-uid".into()),
                21 => ("-", "true".into()),
                22 => ("Watch", "true".into()),
                _ => ("timeout", rng.pick(&["5s", "x", "1h"]).to_string()),
            };
            pairs.push((key.into(), value));
        }
        pairs
    }

    /// The raw query, with now and then a pair Go drops (`;`, a bad escape).
    fn raw_query(&self, rng: &mut Rng, pairs: &[(String, String)]) -> String {
        let mut parts: Vec<String> = pairs
            .iter()
            .map(|(k, v)| {
                let encoded: String = form_urlencoded::byte_serialize(v.as_bytes()).collect();
                if v.is_empty() && k == "watch" && rng.chance(50) {
                    k.clone()
                } else {
                    format!("{k}={encoded}")
                }
            })
            .collect();
        if rng.chance(5) {
            parts.push("labelSelector=x;y".into());
        }
        if rng.chance(5) {
            parts.push("fieldSelector=%zz".into());
        }
        parts.join("&")
    }

    fn collection(&self, rng: &mut Rng, namespace: &str) -> String {
        let (group, version) = match rng.below(30) {
            0 => (self.group, "v2"),
            1 => ("other.example.com", self.version),
            _ => (self.group, self.version),
        };
        match rng.below(12) {
            0 => format!("/apis/{group}/{version}/{}", self.resource),
            1 => format!(
                "/apis/{group}/{version}/watch/namespaces/{namespace}/{}",
                self.resource
            ),
            2 => format!(
                "/apis/{group}/{version}//namespaces/{namespace}/{}/",
                self.resource
            ),
            _ => format!(
                "/apis/{group}/{version}/namespaces/{namespace}/{}",
                self.resource
            ),
        }
    }

    /// One request.
    pub fn request(&self, rng: &mut Rng) -> Request {
        let read_namespace = self.namespace(rng);
        let name = self.name(rng);
        let collection = self.collection(rng, &read_namespace);
        let object = format!("{collection}/{name}");
        // Writes go to the door's own namespaces, under names it may read
        // back; now and then to the longest namespace there is, or to one
        // no namespace can be.
        let write_namespace = match rng.below(40) {
            0 => self.maximal_namespace.to_string(),
            1 => rng
                .pick(&["UPPER", "a.b", "-x", &"n".repeat(64)])
                .to_string(),
            _ => rng.pick(NAMESPACES).to_string(),
        };
        let write_collection = self.collection(rng, &write_namespace);
        let write_object = format!("{write_collection}/{}", self.write_name(rng));
        let accept = rng.pick(ACCEPTS).to_string();
        let kind = if self.writes {
            rng.below(23)
        } else {
            *rng.pick(&[0, 1, 2, 3, 4, 5, 6, 20, 21])
        };
        let (method, path, watch, body, content_type) = match kind {
            0..=2 => ("GET", collection.clone(), false, Vec::new(), None),
            3 if rng.chance(40) => ("GET", collection.clone(), true, Vec::new(), None),
            3 => ("GET", collection.clone(), false, Vec::new(), None),
            4 | 5 => ("GET", object.clone(), false, Vec::new(), None),
            6 => {
                let sub = rng.pick(&["status", "scale", "proxy", "binding"]);
                ("GET", format!("{object}/{sub}"), false, Vec::new(), None)
            }
            7..=10 => {
                let created = self.write_name(rng);
                let (body, content_type) = self.object_body(rng, &created, &write_namespace);
                (
                    "POST",
                    write_collection.clone(),
                    false,
                    body,
                    Some(content_type),
                )
            }
            11 | 12 => {
                let target = write_object
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let (body, content_type) = self.object_body(rng, &target, &write_namespace);
                let sub = if rng.chance(20) { "/status" } else { "" };
                (
                    "PUT",
                    format!("{write_object}{sub}"),
                    false,
                    body,
                    Some(content_type),
                )
            }
            13..=16 => {
                let target = write_object
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let (body, content_type) = self.patch_body(rng, &target);
                let sub = *rng.pick(&["", "", "", "/status", "/scale"]);
                (
                    "PATCH",
                    format!("{write_object}{sub}"),
                    false,
                    body,
                    Some(content_type),
                )
            }
            17 | 18 => {
                let (body, content_type) = self.delete_body(rng);
                ("DELETE", object.clone(), false, body, content_type)
            }
            // A subresource no resource has.
            20 => {
                let method = *rng.pick(&["GET", "GET", "PUT", "PATCH", "DELETE"]);
                let sub = format!("made-up-{}", rng.below(1_000_000));
                let (body, content_type) = match method {
                    "PUT" => {
                        let (body, content_type) = self.object_body(rng, &name, &read_namespace);
                        (body, Some(content_type))
                    }
                    "PATCH" => (
                        b"{}".to_vec(),
                        Some("application/merge-patch+json".to_string()),
                    ),
                    _ => (Vec::new(), None),
                };
                (method, format!("{object}/{sub}"), false, body, content_type)
            }
            // A method no resource has.
            21 => {
                let method = *rng.pick(&["OPTIONS", "PROPFIND", "TRACE", "FOO", "CONNECT"]);
                let target = if rng.chance(50) { &collection } else { &object };
                (method, target.clone(), false, Vec::new(), None)
            }
            _ => ("DELETE", collection.clone(), false, Vec::new(), None),
        };
        // Any request on a `/watch/` path is a watch: it gets a timeout too.
        let watch = watch || path.contains("/watch/");
        let pairs = self.query(rng, watch);
        let query = self.raw_query(rng, &pairs);
        let path = if query.is_empty() {
            path
        } else {
            format!("{path}?{query}")
        };
        let mut headers = Vec::new();
        if !accept.is_empty() {
            headers.push(("accept", accept));
        }
        if let Some(content_type) = content_type {
            headers.push(("content-type", content_type));
        }
        Request {
            method,
            path,
            headers,
            body,
            watch: watch
                || pairs
                    .iter()
                    .any(|(k, v)| k == "watch" && !matches!(v.as_str(), "false" | "0" | "FALSE")),
        }
    }

    fn labels(&self, rng: &mut Rng) -> serde_json::Value {
        let mut labels = serde_json::Map::new();
        labels.insert("owner".into(), "fuzz".into());
        if rng.chance(25) {
            let consumer = self
                .consumers
                .get(rng.below(self.consumers.len()))
                .cloned()
                .unwrap_or_default();
            labels.insert("bindery.dev/consumer".into(), consumer.into());
        }
        if rng.chance(25) {
            let identity = self
                .identities
                .get(rng.below(self.identities.len()))
                .cloned()
                .unwrap_or_default();
            labels.insert("bindery.dev/export".into(), identity.into());
        }
        if rng.chance(10) {
            return serde_json::Value::Null;
        }
        serde_json::Value::Object(labels)
    }

    /// A Widget to create or update, encoded one of many ways.
    fn object_body(&self, rng: &mut Rng, name: &str, namespace: &str) -> (Vec<u8>, String) {
        let mut metadata = serde_json::json!({"name": name, "labels": self.labels(rng)});
        if rng.chance(20) {
            let other = self.namespace(rng);
            let chosen = rng.pick(&[namespace.to_string(), other]).clone();
            metadata["namespace"] = serde_json::Value::String(chosen);
        }
        if rng.chance(10) && !self.versions.is_empty() {
            metadata["resourceVersion"] =
                serde_json::Value::String(rng.pick(self.versions).clone());
        }
        if rng.chance(5) {
            metadata["finalizers"] = serde_json::json!(["fuzz.bindery.dev/hold"]);
        }
        let object = serde_json::json!({
            "apiVersion": format!("{}/{}", self.group, self.version), "kind": self.kind,
            "metadata": metadata,
            "spec": {"size": rng.pick(&["small", "medium", "bogus"]), "replicas": rng.below(3)},
        });
        let json = object.to_string();
        let labels_start = json.find("\"labels\"");
        match rng.below(17) {
            // Larger than kube-apiserver takes (3 MiB).
            14 => {
                let filler = "x".repeat(3 * 1024 * 1024 + 100);
                (
                    json.replacen(
                        "\"spec\":{",
                        &format!("\"spec\":{{\"filler\":\"{filler}\","),
                        1,
                    )
                    .into_bytes(),
                    "application/json".into(),
                )
            }
            // Odd unicode: in the name, a label value, the spec.
            15 => {
                let odd = *rng.pick(&[
                    "\u{e9}t\u{e9}",
                    "\u{202e}x",
                    "\u{1f600}",
                    "a\u{301}",
                    "\u{0}",
                    "\u{feff}z",
                ]);
                let odd = serde_json::to_string(odd).unwrap_or_default();
                let odd = odd.trim_matches('"');
                let at = *rng.pick(&["name", "label", "spec"]);
                let json = match at {
                    "name" => json.replacen(
                        &format!("\"name\":\"{name}\""),
                        &format!("\"name\":\"{name}{odd}\""),
                        1,
                    ),
                    "label" => {
                        json.replace("\"owner\":\"fuzz\"", &format!("\"owner\":\"fu{odd}zz\""))
                    }
                    _ => json.replacen("\"spec\":{", &format!("\"spec\":{{\"text\":\"{odd}\","), 1),
                };
                (json.into_bytes(), "application/json".into())
            }
            // As deep as Go reads, and one level deeper.
            16 => {
                let levels = *rng.pick(&[9_998usize, 9_999]);
                let deep = format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
                (
                    json.replacen("\"spec\":{", &format!("\"spec\":{{\"deep\":{deep},"), 1)
                        .into_bytes(),
                    "application/json".into(),
                )
            }
            0 => (
                json.replace("\"owner\":\"fuzz\"", "\"owner\":\"fu\\ud800zz\"")
                    .into_bytes(),
                "application/json".into(),
            ),
            1 => {
                let mut bytes = json.into_bytes();
                if let Some(at) = bytes.windows(4).position(|w| w == b"fuzz") {
                    bytes.splice(at..at + 2, [0xff, 0xfe]);
                }
                (bytes, "application/json".into())
            }
            2 => {
                let depth = *rng.pick(&[130usize, 300, 10_001]);
                let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
                (
                    json.replacen("\"spec\":{", &format!("\"spec\":{{\"deep\":{deep},"), 1)
                        .into_bytes(),
                    "application/json".into(),
                )
            }
            3 => match labels_start {
                // A duplicate labels key: Go keeps the last.
                Some(_) => (
                    json.replacen(
                        "\"metadata\":{",
                        &format!(
                            "\"metadata\":{{\"labels\":{{\"bindery.dev/consumer\":\"{}\"}},",
                            self.consumers.first().cloned().unwrap_or_default()
                        ),
                        1,
                    )
                    .into_bytes(),
                    "application/json".into(),
                ),
                None => (json.into_bytes(), "application/json".into()),
            },
            4 => (crate_yaml(&object), "application/yaml".into()),
            5 => (
                b"\x6b\x38\x73\x00\x0a\x00".to_vec(),
                "application/vnd.kubernetes.protobuf".into(),
            ),
            6 => (
                json.as_bytes()[..json.len() / 2].to_vec(),
                "application/json".into(),
            ),
            7 => (b"null".to_vec(), "application/json".into()),
            8 => (json.into_bytes(), "application/json; charset=utf-8".into()),
            9 => (
                json.into_bytes(),
                rng.pick(&[
                    "text/plain",
                    "application/cbor",
                    "Application/JSON",
                    "application/json; x",
                ])
                .to_string(),
            ),
            _ => (json.into_bytes(), "application/json".into()),
        }
    }

    fn patch_body(&self, rng: &mut Rng, name: &str) -> (Vec<u8>, String) {
        let identity = self.identities.first().cloned().unwrap_or_default();
        let json_patches = [
            serde_json::json!([{"op": "replace", "path": "/metadata/labels", "value": null}]),
            serde_json::json!([{"op": "remove", "path": "/metadata/labels"}]),
            serde_json::json!([{"op": "replace", "path": "/metadata", "value": {"name": name}}]),
            serde_json::json!([{"op": "add", "path": "/metadata/labels/bindery.dev~1export", "value": identity}]),
            serde_json::json!([{"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"}]),
            serde_json::json!([{"op": "move", "from": "/metadata/labels", "path": "/spec/stolen"}]),
            serde_json::json!([{"op": "replace", "path": "/metadata/namespace", "value": self.namespace(rng)}]),
            serde_json::json!([{"op": "test", "path": "/metadata/labels", "value": {}}, {"op": "add", "path": "/spec/replicas", "value": 2}]),
            serde_json::json!([{"op": "add", "path": "/metadata/labels", "value": {"bindery.dev/consumer": "x"}}]),
            serde_json::json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
            serde_json::json!({"op": "add"}),
        ];
        let merge_patches = [
            serde_json::json!({"metadata": {"labels": null}}),
            serde_json::json!({"metadata": {"labels": {"bindery.dev/export": identity}}}),
            serde_json::json!({"metadata": {"namespace": self.namespace(rng)}}),
            serde_json::json!({"metadata": null}),
            serde_json::json!({"spec": {"replicas": 2}, "status": {"replicas": 1}}),
            serde_json::Value::Null,
        ];
        match rng.below(10) {
            0..=3 => (
                rng.pick(&json_patches).to_string().into_bytes(),
                "application/json-patch+json".into(),
            ),
            4..=6 => (
                rng.pick(&merge_patches).to_string().into_bytes(),
                "application/merge-patch+json".into(),
            ),
            7 => {
                let config = serde_json::json!({"apiVersion": format!("{}/{}", self.group, self.version),
                    "kind": self.kind, "metadata": {"name": name, "labels": self.labels(rng)},
                    "spec": {"size": "large"}});
                (
                    config.to_string().into_bytes(),
                    "application/apply-patch+yaml".into(),
                )
            }
            8 => (
                b"{\"spec\":{\"size\":\"large\"}}".to_vec(),
                "application/strategic-merge-patch+json".into(),
            ),
            _ => (
                b"{\"metadata\":{\"labels\":{\"a\":\"\\ud800\"}}}".to_vec(),
                "application/merge-patch+json".into(),
            ),
        }
    }

    fn delete_body(&self, rng: &mut Rng) -> (Vec<u8>, Option<String>) {
        match rng.below(5) {
            0 => (
                br#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-yours"}}"#.to_vec(),
                Some("application/json".into()),
            ),
            1 => (
                br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan","labels":{"bindery.dev/consumer":"x"}}"#.to_vec(),
                Some("application/json".into()),
            ),
            2 => (b"\x6b\x38\x73\x00garbage".to_vec(), Some("application/vnd.kubernetes.protobuf".into())),
            _ => (Vec::new(), None),
        }
    }
}

/// A JSON value as YAML, the simple way (JSON is YAML).
fn crate_yaml(value: &serde_json::Value) -> Vec<u8> {
    serde_norway::to_string(value)
        .unwrap_or_default()
        .into_bytes()
}
