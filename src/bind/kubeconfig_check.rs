//! A binder hands bindery a kubeconfig for its app cluster. bindery will use
//! it, so it must not make bindery run a program (exec, auth providers) or
//! read bindery's own files (paths), nor skip verifying the server it names
//! (the registered CA is what later binds are checked against): only inline
//! data is accepted. Pure.

use kube::config::Kubeconfig;

/// `Ok` when `text` is a kubeconfig bindery may use: one current context,
/// inline certificates, a token or an inline client certificate.
pub fn check(text: &str) -> Result<(), String> {
    let config = Kubeconfig::from_yaml(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let context = config
        .current_context
        .as_deref()
        .ok_or("the kubeconfig has no current-context")?;
    if !config.contexts.iter().any(|c| c.name == context) {
        return Err(format!(
            "the current context {context:?} is not in the kubeconfig"
        ));
    }
    for cluster in &config.clusters {
        let Some(c) = &cluster.cluster else { continue };
        if c.certificate_authority.is_some() {
            return Err(format!(
                "cluster {:?}: certificate-authority names a file; use certificate-authority-data",
                cluster.name
            ));
        }
        if c.insecure_skip_tls_verify == Some(true) {
            return Err(format!(
                "cluster {:?}: insecure-skip-tls-verify is not accepted",
                cluster.name
            ));
        }
        if c.proxy_url.is_some() {
            return Err(format!(
                "cluster {:?}: proxy-url is not accepted",
                cluster.name
            ));
        }
        let server = c.server.as_deref().unwrap_or_default();
        if !server.starts_with("https://") {
            return Err(format!(
                "cluster {:?}: the server must be an https:// URL",
                cluster.name
            ));
        }
    }
    for user in &config.auth_infos {
        let Some(a) = &user.auth_info else { continue };
        let refused = [
            (a.exec.is_some(), "exec"),
            (a.auth_provider.is_some(), "auth-provider"),
            (a.token_file.is_some(), "tokenFile"),
            (
                a.client_certificate.is_some(),
                "client-certificate (a file)",
            ),
            (a.client_key.is_some(), "client-key (a file)"),
            (
                a.impersonate.is_some() || a.impersonate_groups.is_some(),
                "impersonation",
            ),
            (
                a.username.is_some() || a.password.is_some(),
                "basic authentication",
            ),
        ];
        if let Some((_, what)) = refused.iter().find(|(present, _)| *present) {
            return Err(format!(
                "user {:?}: {what} is not accepted; use a token or inline data",
                user.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: app\ncontexts:\n- name: app\n  context: {{cluster: app, user: bindery}}\n\
             clusters:\n- name: app\n  cluster:\n{cluster}\nusers:\n- name: bindery\n  user:\n{user}\n"
        )
    }

    const SERVER: &str = "    server: https://127.0.0.1:6443\n    certificate-authority-data: Zm9v";
    const TOKEN: &str = "    token: abc";

    #[test]
    fn inline_data_and_a_token_pass() {
        check(&kubeconfig(SERVER, TOKEN)).unwrap();
        check(&kubeconfig(
            SERVER,
            "    client-certificate-data: Zm9v\n    client-key-data: Zm9v",
        ))
        .unwrap();
    }

    #[test]
    fn programs_files_and_plain_http_are_refused() {
        let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, id]";
        for (cluster, user, says) in [
            (SERVER, exec, "exec"),
            (
                SERVER,
                "    auth-provider:\n      name: gcp",
                "auth-provider",
            ),
            (SERVER, "    tokenFile: /etc/shadow", "tokenFile"),
            (
                SERVER,
                "    client-certificate: /etc/bindery/tls.crt\n    client-key: /k",
                "client-certificate",
            ),
            (SERVER, "    as: admin\n    token: x", "impersonation"),
            (SERVER, "    username: a\n    password: b", "basic"),
            (
                "    server: https://x\n    certificate-authority: /etc/ca.crt",
                TOKEN,
                "certificate-authority",
            ),
            ("    server: http://127.0.0.1:8080", TOKEN, "https"),
            (
                "    server: https://x\n    insecure-skip-tls-verify: true",
                TOKEN,
                "insecure-skip-tls-verify",
            ),
            (
                "    server: https://x\n    proxy-url: http://evil",
                TOKEN,
                "proxy-url",
            ),
        ] {
            let error = check(&kubeconfig(cluster, user)).unwrap_err();
            assert!(error.contains(says), "{says}: {error}");
        }
        assert!(check("not: [yaml").is_err());
        assert!(
            check("apiVersion: v1\nkind: Config\n")
                .unwrap_err()
                .contains("current-context")
        );
    }
}
