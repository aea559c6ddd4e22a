//! The interactive bind in a real headless Chromium (Debian's `chromium`
//! and `chromium-driver`, installed by `hack/browser-deps`), driven over
//! WebDriver: `bindery bind` without `--template` prints the page's address;
//! the browser sees each template's description, resources and claims,
//! clicks Bind, and watches the page report the bind done, after which
//! kubectl in the app cluster serves the API. A template that cannot be
//! bound says so on the page in plain words.

use crate::bind::app_cluster_binds;
use crate::binder::{binder_token, bindery_cli, succeeded};
use crate::bindery::bindery;
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless Chromium session behind chromedriver.
struct Browser {
    driver: Child,
    base: String,
    session: String,
}

impl Browser {
    fn start() -> Self {
        for needed in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(needed).exists(),
                "{needed} is missing: hack/browser-deps installs Debian's chromium and chromium-driver"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while call("GET", &format!("{base}/status"), None)["value"]["ready"] != true {
            assert!(Instant::now() < deadline, "chromedriver never became ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        let created = call(
            "POST",
            &format!("{base}/session"),
            Some(json!({"capabilities": {"alwaysMatch": {
                // bindery's serving CA is the test PKI's, not the browser's.
                "acceptInsecureCerts": true,
                "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                ]},
            }}})),
        );
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_string();
        Self {
            driver,
            base,
            session,
        }
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(
            method,
            &format!("{}/session/{}{path}", self.base, self.session),
            body,
        )
    }

    fn open(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})));
    }

    /// The element `css` selects, if there is one.
    fn find(&self, css: &str) -> Option<String> {
        let found = self.command(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        found["value"]
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn text(&self, css: &str) -> String {
        let element = self
            .find(css)
            .unwrap_or_else(|| panic!("no {css} on the page:\n{}", self.source()));
        self.command("GET", &format!("/element/{element}/text"), None)["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn click(&self, css: &str) {
        let element = self
            .find(css)
            .unwrap_or_else(|| panic!("no {css} on the page:\n{}", self.source()));
        self.command(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        );
    }

    fn source(&self) -> String {
        self.command("GET", "/source", None)["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until `css` shows text containing `wanted`; returns the text.
    fn wait_for_text(&self, css: &str, wanted: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if self.find(css).is_some() {
                let text = self.text(css);
                if text.contains(wanted) {
                    return text;
                }
                assert!(
                    Instant::now() < deadline,
                    "{css} never said {wanted:?}; it says {text:?}"
                );
            } else {
                assert!(Instant::now() < deadline, "{css} never appeared");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = call(
            "DELETE",
            &format!("{}/session/{}", self.base, self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// One WebDriver call (JSON over HTTP) with curl.
fn call(method: &str, url: &str, body: Option<Value>) -> Value {
    let mut command = Command::new("curl");
    command.args(["-s", "-X", method, url]);
    if let Some(body) = body {
        command.args([
            "-H",
            "Content-Type: application/json",
            "--data",
            &body.to_string(),
        ]);
    }
    let output = command.output().expect("curl runs");
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

/// `bindery bind` without a template: returns the process and the page's URL.
fn interactive_bind(token: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .arg("bind")
        .arg(&bindery().url)
        .arg("--certificate-authority")
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .arg("--kubeconfig")
        .arg(&clusters().app.kubeconfig)
        .env("BINDERY_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bindery bind starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) if line.trim_start().starts_with("https://") => {
                break line.trim().to_string();
            }
            Some(Ok(_)) => {}
            _ => {
                let output = child.wait_with_output().expect("bind ended");
                panic!(
                    "bind printed no page address: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
    };
    (child, url)
}

fn finish(mut child: Child, within: Duration) -> (bool, String) {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for bind") {
            let mut stderr = String::new();
            use std::io::Read;
            let _ = child
                .stderr
                .take()
                .map(|mut e| e.read_to_string(&mut stderr));
            return (status.success(), stderr);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bind did not finish within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_bind_picked_in_the_browser_serves_the_api_in_the_app_cluster() {
    install_examples();
    let _guard = app_cluster_binds();
    let (binder, token) = binder_token(true);
    // A template that cannot be bound: its CRD does not exist.
    let broken = unique_name("broken");
    clusters().provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: kube-bind.io/v1alpha2\nkind: APIServiceExportTemplate\n\
             metadata: {{name: {broken}}}\nspec:\n  description: Nothing behind it.\n  \
             scope: Namespaced\n  resources: [{{group: gone.example.com, resource: ghosts}}]\n"
        )),
    );
    let browser = Browser::start();

    // The failing one first: the page says why.
    let (bind, url) = interactive_bind(&token);
    browser.open(&url);
    let card = browser.text(&format!("li.offer[data-template=\"{broken}\"]"));
    assert!(
        card.contains("its CRD is missing in the provider"),
        "{card}"
    );
    browser.click(&format!("#bind-{broken}"));
    let said = browser.wait_for_text("#result", "Binding failed", Duration::from_secs(90));
    assert!(
        said.contains("CustomResourceDefinition \"ghosts.gone.example.com\" does not exist"),
        "{said}"
    );
    let (ok, stderr) = finish(bind, Duration::from_secs(30));
    assert!(!ok, "the bind failed in the terminal too: {stderr}");

    // Then a real one.
    let (bind, url) = interactive_bind(&token);
    browser.open(&url);
    assert!(browser.text("header .who").contains(&binder));
    let card = browser.text("li.offer[data-template=\"postgresql\"]");
    for shown in [
        "Managed PostgreSQL, with the connection credentials as a Secret.",
        "postgresqlinstances.db.example.com (namespaced; versions v1, v1beta1)",
        "secrets (core group), owned by the provider, with labels app.kubernetes.io/part-of=postgresql",
    ] {
        assert!(card.contains(shown), "{shown:?} on the card:\n{card}");
    }
    browser.click("#bind-postgresql");
    browser.wait_for_text("#result", "postgresql is bound.", Duration::from_secs(120));
    let steps = browser.text("#steps");
    assert!(steps.contains("You picked postgresql"), "{steps}");
    assert!(steps.contains("The provider's export is ready"), "{steps}");
    let (ok, stderr) = finish(bind, Duration::from_secs(30));
    assert!(ok, "bind failed: {stderr}");

    // kubectl in the app cluster serves it from the provider.
    let app = &clusters().app;
    let name = unique_name("picked");
    app.kubectl_with_stdin(
        &["-n", "default", "apply", "-f", "-"],
        Some(&format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
        )),
    );
    let listed = app.kubectl(&["get", "postgresqlinstances", "-A"]);
    assert!(listed.contains(&name), "{listed}");

    // An expired or made-up session is a clear page too.
    browser.open(&format!("{}/bind/sessions/made-up", bindery().url));
    assert!(browser.text("#error").contains("unknown or has expired"));

    app.kubectl(&["-n", "default", "delete", "postgresqlinstance", &name]);
    succeeded("unbind", &bindery_cli("unbind", &token, &["postgresql"]));
}
