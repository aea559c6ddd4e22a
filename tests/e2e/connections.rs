//! Client connections as kube-apiserver keeps them: one that stays idle
//! (no request in flight) is closed after the idle timeout, so an app
//! cluster that stops calling stops costing its connection's buffers, and
//! one that never finishes its TLS handshake is closed after 32 s.

use crate::bindery::{bindery, serving_only};
use crate::fixture::clusters;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    const IDLE: Duration = Duration::from_secs(2);
    const WAIT_AT_MOST: Duration = Duration::from_secs(20);
    let server = serving_only(
        &clusters().provider.kubeconfig,
        &["--idle-connection-timeout", &IDLE.as_secs().to_string()],
    );
    let address = server.url.trim_start_matches("https://").to_string();
    // One keep-alive request (answered 401 without a client certificate),
    // then the client stays connected with nothing more to send.
    let started = Instant::now();
    let mut client = Command::new("openssl")
        .args(["s_client", "-quiet", "-alpn", "http/1.1", "-connect"])
        .arg(&address)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client starts");
    let mut stdin = client.stdin.take().expect("piped");
    stdin
        .write_all(b"GET /version HTTP/1.1\r\nHost: bindery\r\n\r\n")
        .expect("sending the request");
    // s_client's output ends when the connection does.
    let mut stdout = client.stdout.take().expect("piped");
    let (sender, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut answer = String::new();
        let _ = stdout.read_to_string(&mut answer);
        let _ = sender.send((answer, started.elapsed()));
    });
    let outcome = closed.recv_timeout(WAIT_AT_MOST);
    let _ = client.kill();
    let _ = client.wait();
    drop(stdin);
    let Ok((answer, closed_after)) = outcome else {
        panic!("the idle connection was still open after {WAIT_AT_MOST:?} (idle timeout {IDLE:?})");
    };
    assert!(
        answer.starts_with("HTTP/1.1 "),
        "the request was answered on the connection: {answer:?}"
    );
    assert!(
        closed_after >= IDLE,
        "the connection was closed after {closed_after:?}, before the idle timeout"
    );
}

#[test]
fn a_connection_that_never_handshakes_is_closed_after_the_handshake_timeout() {
    let timeout = bindery::server::TLS_HANDSHAKE_TIMEOUT;
    let address = bindery().url.trim_start_matches("https://").to_string();
    let mut silent = std::net::TcpStream::connect(&address).expect("connecting to bindery");
    let started = Instant::now();
    silent
        .set_read_timeout(Some(timeout + Duration::from_secs(20)))
        .expect("a read timeout");
    // The client sends nothing; the read ends when bindery closes.
    let mut buffer = [0u8; 64];
    let read = silent.read(&mut buffer);
    let closed_after = started.elapsed();
    assert!(
        matches!(read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "bindery closed the connection (read: {read:?} after {closed_after:?})"
    );
    assert!(
        closed_after >= timeout - Duration::from_secs(1),
        "closed after {closed_after:?}, before the handshake timeout {timeout:?}"
    );
}
