//! Issue 20, "Bind cannot be hijacked": an app cluster's identity (its
//! kube-system UID) is no secret, so a binder who knows another's must not
//! be able to re-register that app cluster with a kubeconfig for a server of
//! its own that answers the same UID, nor unbind it with such a "proof".
//! Once registered, an app cluster's registration changes only through the
//! registered server verified by the registered CA, or by a provider
//! administrator, and what it records of the app cluster's trust is read
//! from the app cluster; an account that may not read it (made by an older
//! `bindery bind`) keeps the registered values. The fake app cluster here
//! is a small HTTPS server with a CA of its own that answers the victim's
//! UID, publishes a front-proxy CA of its own and allows every
//! SubjectAccessReview, as an attacker's would.

use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::{bind_template, binder_token, bindery_cli, curl_with_token, succeeded};
use crate::bindery::bindery;
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use base64::Engine;
use bindery::certs::authority::{Authority, Usage};
use bindery::controllers::naming::cluster_namespace;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_rustls::TlsAcceptor;

/// An attacker's app cluster: answers `identity` as its kube-system UID.
struct FakeAppCluster {
    addr: SocketAddr,
    /// PEM of the CA of its serving certificate.
    ca_pem: String,
    /// PEM of the front-proxy CA it publishes.
    front_proxy_ca_pem: String,
    /// `<method> <path>` of every request it was sent.
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeAppCluster {
    /// Starts it on a free loopback port, on its own thread and runtime.
    fn start(identity: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = Authority::generate("fake-app-cluster-ca").expect("CA");
        let serving = ca
            .issue(
                "fake-app-cluster",
                &Usage::Server {
                    dns_names: vec!["localhost".into()],
                    ips: vec!["127.0.0.1".parse().unwrap()],
                },
            )
            .expect("serving certificate");
        let front_proxy_ca = Authority::generate("fake-front-proxy-ca").expect("CA");
        let chain = vec![CertificateDer::from_pem_slice(serving.cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answers = Answers {
            identity: identity.to_string(),
            front_proxy_ca_pem: front_proxy_ca.pem().cert_pem.clone(),
            requests: requests.clone(),
        };
        std::thread::spawn(move || serve(listener, acceptor, Arc::new(answers)));
        FakeAppCluster {
            addr,
            ca_pem: ca.pem().cert_pem.clone(),
            front_proxy_ca_pem: front_proxy_ca.pem().cert_pem.clone(),
            requests,
        }
    }

    fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// A kubeconfig that reaches it, with inline data only.
    fn kubeconfig(&self) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n\
             clusters: [{{name: fake, cluster: {{server: '{}', certificate-authority-data: {ca}}}}}]\n\
             users: [{{name: fake, user: {{token: attacker}}}}]\n",
            self.url()
        )
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// What the fake app cluster answers.
struct Answers {
    identity: String,
    front_proxy_ca_pem: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Answers {
    fn answer(&self, method: &str, path: &str) -> (u16, Value) {
        self.requests
            .lock()
            .unwrap()
            .push(format!("{method} {path}"));
        match (method, path) {
            ("GET", "/api/v1/namespaces/kube-system") => (
                200,
                json!({"kind": "Namespace", "apiVersion": "v1",
                    "metadata": {"name": "kube-system", "uid": self.identity}}),
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
            ) => (
                200,
                json!({"kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": {
                    "requestheader-client-ca-file": self.front_proxy_ca_pem,
                    "requestheader-allowed-names": "[\"front-proxy-client\"]",
                }}),
            ),
            ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => (
                201,
                json!({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                    "spec": {}, "status": {"allowed": true}}),
            ),
            _ => (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "reason": "NotFound", "code": 404,
                    "message": "the server could not find the requested resource"}),
            ),
        }
    }
}

fn serve(listener: std::net::TcpListener, acceptor: TlsAcceptor, answers: Arc<Answers>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, answers) = (acceptor.clone(), answers.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let (code, body) =
                        answers.answer(request.method().as_str(), request.uri().path());
                    let response = Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(body.to_string())))
                        .expect("a response");
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
}

/// The real app cluster's identity.
fn app_identity() -> String {
    clusters()
        .app
        .kubectl(&[
            "get",
            "namespace",
            "kube-system",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .trim()
        .to_string()
}

/// The `app-cluster` Secret of `namespace`: its resourceVersion and data;
/// `None` when there is none.
fn registration(namespace: &str) -> Option<(String, Value)> {
    let out = clusters().provider.kubectl_output(
        &[
            "-n",
            namespace,
            "get",
            "secret",
            "app-cluster",
            "-o",
            "json",
        ],
        None,
    );
    let secret: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((
        secret["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        secret["data"].clone(),
    ))
}

/// The registration's data, which must be there.
fn registered_data(namespace: &str) -> Value {
    registration(namespace)
        .unwrap_or_else(|| panic!("{namespace} has no app-cluster Secret"))
        .1
}

/// One key of a registration's data, decoded.
fn decoded(data: &Value, key: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data[key].as_str().unwrap_or_default())
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

fn exists(namespace: &str, what: &str, name: &str) -> bool {
    clusters()
        .provider
        .kubectl_output(&["-n", namespace, "get", what, name], None)
        .status
        .success()
}

fn post_binding(token: &str, body: &Value) -> (u16, Value) {
    curl_with_token(
        "POST",
        &format!("{}/bind/bindings", bindery().url),
        Some(token),
        Some(&body.to_string()),
    )
}

fn delete_binding(token: &str, consumer: &str, export: &str, proof: &Value) -> (u16, Value) {
    curl_with_token(
        "DELETE",
        &format!("{}/bind/bindings/{consumer}/{export}", bindery().url),
        Some(token),
        Some(&proof.to_string()),
    )
}

/// A registration for `identity` whose kubeconfig reaches `fake`.
fn registration_at(fake: &FakeAppCluster, identity: &str, front_proxy_ca: &str) -> Value {
    json!({
        "template": "postgresql",
        "identity": identity,
        "registration": {
            "kubeconfig": fake.kubeconfig(),
            "requestheaderClientCa": front_proxy_ca,
            "requestheaderAllowedNames": ["front-proxy-client"],
        },
    })
}

/// A token of a provider administrator: besides `bind`, it may update the
/// `app-cluster` Secrets and delete APIServiceExports, so bindery does for it
/// only what it could do itself.
fn administrator_token() -> (String, String) {
    let provider = &clusters().provider;
    let _ = provider.kubectl_output(&["create", "namespace", "binders"], None);
    let name = unique_name("provider-admin");
    provider.kubectl(&["-n", "binders", "create", "serviceaccount", &name]);
    static ROLE: std::sync::Once = std::sync::Once::new();
    ROLE.call_once(|| {
        provider.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
                 metadata: {name: bindery-provider-admin}\nrules:\n\
                 - {apiGroups: [kube-bind.io], resources: [apiserviceexporttemplates], verbs: [bind]}\n\
                 - {apiGroups: [''], resources: [secrets], resourceNames: [app-cluster], verbs: [update]}\n\
                 - {apiGroups: [kube-bind.io], resources: [apiserviceexports], verbs: [delete]}\n",
            ),
        );
    });
    provider.kubectl(&[
        "create",
        "clusterrolebinding",
        &name,
        "--clusterrole=bindery-provider-admin",
        &format!("--serviceaccount=binders:{name}"),
    ]);
    let token = provider.kubectl(&["-n", "binders", "create", "token", &name]);
    (
        format!("system:serviceaccount:binders:{name}"),
        token.trim().to_string(),
    )
}

/// Unbinds `export` as the app cluster when dropped, so that a failed test
/// leaves the shared app cluster unbound.
struct UnbindAtEnd<'a> {
    token: &'a str,
    export: &'a str,
}

impl Drop for UnbindAtEnd<'_> {
    fn drop(&mut self) {
        let _ = bindery_cli("unbind", self.token, &[self.export]);
    }
}

/// The app cluster still uses the bound API through its aggregator, as its
/// own admin; retried briefly, as the aggregator may be re-checking.
fn still_served() -> Result<(), String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = clusters()
            .app
            .kubectl_output(&["get", "postgresqlinstances", "-n", "default"], None);
        if out.status.success() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(String::from_utf8_lossy(&out.stderr).to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[test]
fn a_binder_cannot_take_over_another_app_clusters_registration_or_unbind_it() {
    install_examples();
    let _guard = app_cluster_binds();
    let victim = bind_template("postgresql");
    let _unbind = UnbindAtEnd {
        token: &victim,
        export: "postgresql",
    };
    let namespace = app_cluster_namespace();
    let consumer = namespace.strip_prefix("kube-bind-").unwrap().to_string();
    let identity = app_identity();
    let before = registration(&namespace).expect("the victim is registered");
    let fake = FakeAppCluster::start(&identity);
    let (attacker_name, attacker) = binder_token(true);

    let taken = post_binding(
        &attacker,
        &registration_at(&fake, &identity, &fake.front_proxy_ca_pem),
    );
    let after_bind = registration(&namespace);
    let proof = json!({"identity": identity, "kubeconfig": fake.kubeconfig()});
    let unbound = delete_binding(&attacker, &consumer, "postgresql", &proof);
    let after_unbind = registration(&namespace);
    let fate = |after: &Option<(String, Value)>| match after {
        None => "deleted".to_string(),
        Some(now) if *now == before => "unchanged".to_string(),
        Some((_, data)) => format!(
            "replaced; it reaches the attacker's server: {}",
            decoded(data, "kubeconfig").contains(&fake.url())
        ),
    };
    eprintln!("re-registration as the attacker: {} {}", taken.0, taken.1);
    eprintln!("the victim's registration after it: {}", fate(&after_bind));
    eprintln!("unbind as the attacker: {} {}", unbound.0, unbound.1);
    eprintln!(
        "the victim's registration after it: {}",
        fate(&after_unbind)
    );
    eprintln!("the attacker's server was asked: {:?}", fake.requests());

    assert_eq!(taken.0, 403, "re-registration: {}", taken.1);
    assert_eq!(taken.1["reason"], "Forbidden", "{}", taken.1);
    assert_eq!(
        taken.1["message"],
        format!(
            "secrets \"app-cluster\" is forbidden: the app cluster of consumer {consumer} is \
             registered with other trust material (another server or certificate authority), \
             and User \"{attacker_name}\" cannot update resource \"secrets\" in API group \"\" \
             in the namespace \"{namespace}\""
        )
    );
    assert_eq!(unbound.0, 403, "unbind: {}", unbound.1);
    assert_eq!(
        unbound.1["message"],
        format!(
            "apiserviceexports.kube-bind.io \"postgresql\" is forbidden: the app cluster of \
             consumer {consumer} is registered with other trust material (another server or \
             certificate authority), and User \"{attacker_name}\" cannot delete resource \
             \"apiserviceexports\" in API group \"kube-bind.io\" in the namespace \"{namespace}\""
        )
    );
    assert_eq!(
        after_bind.as_ref(),
        Some(&before),
        "the registration is unchanged"
    );
    assert_eq!(
        after_unbind.as_ref(),
        Some(&before),
        "the registration is unchanged"
    );
    assert!(exists(&namespace, "apiserviceexport", "postgresql"));
    assert!(exists(&namespace, "apiserviceexportrequest", "postgresql"));
    assert_eq!(
        fake.requests(),
        Vec::<String>::new(),
        "bindery never asked the attacker's server"
    );
    still_served().expect("the victim is still served");

    // The app cluster itself, through another binder, binds again.
    let (_, again) = binder_token(true);
    succeeded(
        "bind again as the app cluster",
        &bindery_cli("bind", &again, &["--template", "postgresql"]),
    );
    let data = registered_data(&namespace);
    assert_eq!(data, before.1, "the same registration is recorded again");
    still_served().expect("served after binding again");
}

#[test]
fn a_provider_administrator_may_replace_a_registration_with_what_the_app_cluster_publishes() {
    install_examples();
    let _guard = app_cluster_binds();
    let victim = bind_template("postgresql");
    let _unbind = UnbindAtEnd {
        token: &victim,
        export: "postgresql",
    };
    let namespace = app_cluster_namespace();
    let identity = app_identity();
    let fake = FakeAppCluster::start(&identity);
    let (_, administrator) = administrator_token();

    // The caller's word for the front-proxy CA is not taken: bindery reads it
    // from the app cluster it reached.
    let claimed = Authority::generate("claimed-front-proxy-ca").unwrap();
    let (code, state) = post_binding(
        &administrator,
        &registration_at(&fake, &identity, &claimed.pem().cert_pem),
    );
    assert_eq!(code, 201, "{state}");
    let data = registered_data(&namespace);
    assert!(
        decoded(&data, "kubeconfig").contains(&fake.url()),
        "the registration reaches the new server"
    );
    assert_eq!(
        decoded(&data, "requestheader-client-ca.crt"),
        fake.front_proxy_ca_pem,
        "the front-proxy CA the app cluster publishes"
    );
    assert_eq!(
        decoded(&data, "requestheader-allowed-names"),
        "front-proxy-client"
    );

    // Now the real app cluster is the one that points elsewhere: its own
    // binder is refused, the administrator puts it back.
    let (_, binder) = binder_token(true);
    let refused = bindery_cli("bind", &binder, &["--template", "postgresql"]);
    assert!(
        !refused.status.success(),
        "a binder replaced the registration"
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("registered with other trust material"),
        "{said}"
    );
    succeeded(
        "bind as the administrator",
        &bindery_cli("bind", &administrator, &["--template", "postgresql"]),
    );
    let data = registered_data(&namespace);
    assert!(decoded(&data, "kubeconfig").contains(&clusters().app.server));
    let published = clusters().app.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "configmap",
        "extension-apiserver-authentication",
        "-o",
        "jsonpath={.data.requestheader-client-ca-file}",
    ]);
    assert_eq!(
        decoded(&data, "requestheader-client-ca.crt").trim(),
        published.trim()
    );
    still_served().expect("served after the administrator put it back");
    // And the app cluster's own binders may change it again.
    succeeded(
        "bind again as the app cluster",
        &bindery_cli("bind", &binder, &["--template", "postgresql"]),
    );
}

/// A consumer bound as `bindery bind -o yaml` leaves it: a request, no
/// registration; and the binder who bound it.
struct Unregistered {
    identity: String,
    binder_name: String,
    binder: String,
    namespace: String,
    consumer: String,
}

/// Binds the template `postgresql` for a new identity named after `tag`,
/// without a registration.
fn bound_without_a_registration(tag: &str) -> Unregistered {
    install_examples();
    let identity = unique_name(tag);
    let (binder_name, binder) = binder_token(true);
    let (code, state) = post_binding(
        &binder,
        &json!({"template": "postgresql", "identity": identity}),
    );
    assert_eq!(code, 201, "{state}");
    let namespace = cluster_namespace("kube-bind-", &identity);
    let consumer = namespace.strip_prefix("kube-bind-").unwrap().to_string();
    assert_eq!(state["consumer"], consumer.as_str());
    Unregistered {
        identity,
        binder_name,
        binder,
        namespace,
        consumer,
    }
}

#[test]
fn a_consumer_without_a_registration_is_unbound_only_by_a_provider_administrator() {
    let Unregistered {
        identity,
        binder_name,
        binder,
        namespace,
        consumer,
    } = bound_without_a_registration("printed-cluster");
    let fake = FakeAppCluster::start(&identity);
    let proof = json!({"identity": identity, "kubeconfig": fake.kubeconfig()});

    let (code, status) = delete_binding(&binder, &consumer, "postgresql", &proof);
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "apiserviceexports.kube-bind.io \"postgresql\" is forbidden: consumer {consumer} has \
             no registered app cluster to prove the unbind against, and User \"{binder_name}\" \
             cannot delete resource \"apiserviceexports\" in API group \"kube-bind.io\" in the \
             namespace \"{namespace}\""
        )
    );
    assert!(exists(&namespace, "apiserviceexportrequest", "postgresql"));
    assert_eq!(fake.requests(), Vec::<String>::new());

    let (_, administrator) = administrator_token();
    let (code, status) = delete_binding(&administrator, &consumer, "postgresql", &proof);
    assert_eq!(code, 200, "{status}");
    assert!(!exists(&namespace, "apiserviceexportrequest", "postgresql"));
}

#[test]
fn without_read_access_to_the_front_proxy_ca_only_the_registered_one_is_kept() {
    install_examples();
    let _guard = app_cluster_binds();
    let victim = bind_template("postgresql");
    let _unbind = UnbindAtEnd {
        token: &victim,
        export: "postgresql",
    };
    let (app, namespace, identity) = (&clusters().app, app_cluster_namespace(), app_identity());
    let before = registration(&namespace).expect("registered");
    // As an account made by an older `bindery bind`: it may not read
    // kube-system/extension-apiserver-authentication.
    app.kubectl(&[
        "-n",
        "kube-system",
        "delete",
        "rolebinding",
        "bindery:authentication-reader",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while app
        .kubectl_output(
            &[
                "-n",
                "kube-system",
                "auth",
                "can-i",
                "get",
                "configmap/extension-apiserver-authentication",
                "--as=system:serviceaccount:kube-bind:bindery",
            ],
            None,
        )
        .status
        .success()
    {
        assert!(std::time::Instant::now() < deadline, "still readable");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (binder_name, binder) = binder_token(true);
    let names: Vec<String> = decoded(&before.1, "requestheader-allowed-names")
        .split(',')
        .map(str::to_string)
        .collect();
    let claiming = |ca: &str| {
        json!({"template": "postgresql", "identity": identity, "registration": {
            "kubeconfig": decoded(&before.1, "kubeconfig"),
            "requestheaderClientCa": ca, "requestheaderAllowedNames": names}})
    };

    let other = Authority::generate("unconfirmed-front-proxy-ca").unwrap();
    let (code, status) = post_binding(&binder, &claiming(&other.pem().cert_pem));
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "secrets \"app-cluster\" is forbidden: the front-proxy CA differs from the registered \
             one and cannot be read from the app cluster's \
             kube-system/extension-apiserver-authentication to confirm it, and User \
             \"{binder_name}\" cannot update resource \"secrets\" in API group \"\" in the \
             namespace \"{namespace}\""
        )
    );
    assert_eq!(registration(&namespace).as_ref(), Some(&before));
    // The registered values themselves are still accepted, as an older
    // client sends them.
    let registered_ca = decoded(&before.1, "requestheader-client-ca.crt");
    let (code, state) = post_binding(&binder, &claiming(&registered_ca));
    assert_eq!(code, 201, "{state}");
    assert_eq!(registered_data(&namespace), before.1);
    // Binding again gives the account its read access back.
    succeeded(
        "bind again",
        &bindery_cli("bind", &binder, &["--template", "postgresql"]),
    );
    app.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "rolebinding",
        "bindery:authentication-reader",
    ]);
}

/// A consumer that exists without a registration (bound with `bind -o
/// yaml`, or moved from kube-bind before `bind --export`) is registered only
/// by a provider administrator: its identity is no secret, and on the old
/// code the first binder to bring a server answering it took the consumer.
/// bindery contacts no server for a refused binder, and what a binder's
/// server answers is never echoed (issue 34, item 6).
#[test]
fn a_consumer_without_a_registration_is_registered_only_by_a_provider_administrator() {
    let Unregistered {
        identity,
        binder_name,
        binder,
        namespace,
        consumer,
    } = bound_without_a_registration("unregistered-cluster");
    let fake = FakeAppCluster::start(&identity);

    let (code, status) = post_binding(
        &binder,
        &registration_at(&fake, &identity, &fake.front_proxy_ca_pem),
    );
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "secrets \"app-cluster\" is forbidden: consumer {consumer} is bound without a \
             registered app cluster, and its identity proves nothing, and User \
             \"{binder_name}\" cannot update resource \"secrets\" in API group \"\" in the \
             namespace \"{namespace}\""
        )
    );
    assert_eq!(registration(&namespace), None);
    assert_eq!(fake.requests(), Vec::<String>::new(), "nothing was fetched");

    let (_, administrator) = administrator_token();
    let (code, state) = post_binding(
        &administrator,
        &registration_at(&fake, &identity, &fake.front_proxy_ca_pem),
    );
    assert_eq!(code, 201, "{state}");
    assert!(registration(&namespace).is_some());
    // Unbound again: a consumer whose app cluster is gone with this test
    // must not stay among the export's consumers the other tests see.
    let proof = json!({"identity": identity, "kubeconfig": fake.kubeconfig()});
    let (code, status) = delete_binding(&administrator, &consumer, "postgresql", &proof);
    assert_eq!(code, 200, "{status}");

    // A new identity is first come, first served, but what the named
    // server answers is not echoed: here a kube-system UID of its choice.
    let leaked = unique_name("answer-of-an-internal-server");
    let elsewhere = FakeAppCluster::start(&leaked);
    let fresh = unique_name("fresh-cluster");
    let (code, status) = post_binding(
        &binder,
        &registration_at(&elsewhere, &fresh, &elsewhere.front_proxy_ca_pem),
    );
    assert_eq!(code, 400, "{status}");
    assert!(
        !status.to_string().contains(&leaked),
        "the server's answer is echoed: {status}"
    );
}
