//! Where each certificate lives on disk, and making the missing ones.
//!
//! Every `ensure_*` function is idempotent: an existing CA is loaded and kept,
//! an existing leaf is kept, and only missing files are created. Keys are
//! written with mode 0600. `certs/README.md` says what each file is for.

use super::authority::{Authority, CertError, PemPair, Usage, signing_key_pair};
use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The DNS names and addresses a kube-apiserver on loopback is reached by.
const APISERVER_DNS: &[&str] = &[
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];
/// The first address of the clusters' service range (`--service-cluster-ip-range`).
const APISERVER_SERVICE_IP: &str = "10.0.0.1";

/// Errors from making certificate files.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The files of one test cluster's PKI, below `<out>/<cluster>/`.
#[derive(Clone, Debug)]
pub struct ClusterPki {
    pub dir: PathBuf,
}

impl ClusterPki {
    /// CA for client certificates (`--client-ca-file`) that also signs the serving certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
    /// The kube-apiserver's serving certificate and key.
    pub fn apiserver(&self) -> (PathBuf, PathBuf) {
        self.pair("apiserver")
    }
    /// A `system:masters` client certificate for the admin kubeconfig.
    pub fn admin(&self) -> (PathBuf, PathBuf) {
        self.pair("admin")
    }
    /// The kube-controller-manager's client certificate.
    pub fn controller_manager(&self) -> (PathBuf, PathBuf) {
        self.pair("controller-manager")
    }
    /// The front-proxy CA (`--requestheader-client-ca-file`).
    pub fn front_proxy_ca(&self) -> PathBuf {
        self.dir.join("front-proxy-ca.crt")
    }
    /// The aggregator's client certificate (`--proxy-client-cert-file`).
    pub fn front_proxy_client(&self) -> (PathBuf, PathBuf) {
        self.pair("front-proxy-client")
    }
    /// Service-account token signing key (private, public).
    pub fn service_account(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("sa.key"), self.dir.join("sa.pub"))
    }

    fn pair(&self, name: &str) -> (PathBuf, PathBuf) {
        pair_paths(&self.dir, name)
    }
}

/// The common name the aggregator's client certificate carries; the clusters
/// list it in `--requestheader-allowed-names`.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// Makes every missing file of the PKI of the cluster `name` below `out`.
pub fn ensure_cluster(out: &Path, name: &str) -> Result<ClusterPki, StoreError> {
    let pki = ClusterPki {
        dir: out.join(name),
    };
    create_dir(&pki.dir)?;

    let ca = ensure_authority(&pki.dir, "ca", &format!("{name}-ca"))?;
    let ips = vec![
        IpAddr::from([127, 0, 0, 1]),
        APISERVER_SERVICE_IP.parse().expect("constant address"),
    ];
    let serving = Usage::Server {
        dns_names: APISERVER_DNS.iter().map(|s| s.to_string()).collect(),
        ips,
    };
    ensure_leaf(&ca, &pki.dir, "apiserver", "kube-apiserver", &serving)?;
    let masters = Usage::Client {
        organizations: vec!["system:masters".into()],
    };
    ensure_leaf(&ca, &pki.dir, "admin", "bindery-admin", &masters)?;
    let no_groups = Usage::Client {
        organizations: vec![],
    };
    ensure_leaf(
        &ca,
        &pki.dir,
        "controller-manager",
        "system:kube-controller-manager",
        &no_groups,
    )?;

    let front_proxy = ensure_authority(
        &pki.dir,
        "front-proxy-ca",
        &format!("{name}-front-proxy-ca"),
    )?;
    ensure_leaf(
        &front_proxy,
        &pki.dir,
        "front-proxy-client",
        FRONT_PROXY_CLIENT_NAME,
        &no_groups,
    )?;

    let (private, public) = pki.service_account();
    if !private.exists() || !public.exists() {
        let (private_pem, public_pem) = signing_key_pair()?;
        write_secret(&private, &private_pem)?;
        write_public(&public, &public_pem)?;
    }
    Ok(pki)
}

/// The files of bindery's own PKI, below `<out>/bindery/`.
#[derive(Clone, Debug)]
pub struct BinderyPki {
    pub dir: PathBuf,
}

impl BinderyPki {
    /// CA that signs bindery's serving certificate: the APIService `caBundle`.
    pub fn serving_ca(&self) -> PathBuf {
        self.dir.join("serving-ca.crt")
    }
    /// bindery's serving certificate and key.
    pub fn serving(&self) -> (PathBuf, PathBuf) {
        pair_paths(&self.dir, "serving")
    }
    /// CA whose client certificates name a consumer on `/clusters/<consumer>`.
    pub fn consumer_ca(&self) -> PathBuf {
        self.dir.join("consumer-ca.crt")
    }
    /// A consumer's client certificate and key.
    pub fn consumer(&self, consumer: &str) -> (PathBuf, PathBuf) {
        pair_paths(&self.dir.join("consumers"), consumer)
    }
}

/// Makes bindery's serving CA and certificate (valid for `dns_names` and
/// `ips`, plus localhost, 127.0.0.1 and every consumer's aggregation Service
/// name, `*.kube-bind.svc`) and its consumer client CA. A serving
/// certificate made earlier without one of those names is made again.
pub fn ensure_bindery(
    out: &Path,
    dns_names: &[String],
    ips: &[IpAddr],
) -> Result<BinderyPki, StoreError> {
    let pki = BinderyPki {
        dir: out.join("bindery"),
    };
    create_dir(&pki.dir)?;
    let serving_ca = ensure_authority(&pki.dir, "serving-ca", "bindery-serving-ca")?;
    let mut all_dns = vec![
        "localhost".to_string(),
        crate::aggregation::serving_dns_name(),
    ];
    all_dns.extend(dns_names.iter().cloned());
    let (serving_cert, serving_key) = pair_paths(&pki.dir, "serving");
    if !names_covered(&serving_cert, &all_dns) {
        let _ = fs::remove_file(&serving_cert);
        let _ = fs::remove_file(&serving_key);
    }
    let mut all_ips = vec![IpAddr::from([127, 0, 0, 1])];
    all_ips.extend(ips.iter().copied());
    let serving = Usage::Server {
        dns_names: all_dns,
        ips: all_ips,
    };
    ensure_leaf(&serving_ca, &pki.dir, "serving", "bindery", &serving)?;
    ensure_authority(&pki.dir, "consumer-ca", "bindery-consumer-ca")?;
    Ok(pki)
}

/// Makes the client certificate of one consumer, signed by bindery's consumer CA.
/// The consumer id is the certificate's common name.
pub fn ensure_consumer(pki: &BinderyPki, consumer: &str) -> Result<PathBuf, StoreError> {
    let ca = ensure_authority(&pki.dir, "consumer-ca", "bindery-consumer-ca")?;
    let dir = pki.dir.join("consumers");
    create_dir(&dir)?;
    let usage = Usage::Client {
        organizations: vec!["bindery:consumers".into()],
    };
    ensure_leaf(&ca, &dir, consumer, consumer, &usage)?;
    Ok(pki.consumer(consumer).0)
}

/// Whether the certificate at `cert` exists and names every one of
/// `dns_names`.
fn names_covered(cert: &Path, dns_names: &[String]) -> bool {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let Ok(der) = CertificateDer::from_pem_file(cert) else {
        return false;
    };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(&der) else {
        return false;
    };
    let present: Vec<String> = parsed
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    dns_names.iter().all(|name| present.contains(name))
}

fn pair_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    )
}

fn ensure_authority(dir: &Path, name: &str, common_name: &str) -> Result<Authority, StoreError> {
    let (cert, key) = pair_paths(dir, name);
    if cert.exists() && key.exists() {
        let pem = PemPair {
            cert_pem: read(&cert)?,
            key_pem: read(&key)?,
        };
        return Ok(Authority::from_pem(pem)?);
    }
    let ca = Authority::generate(common_name)?;
    write_secret(&key, &ca.pem().key_pem)?;
    write_public(&cert, &ca.pem().cert_pem)?;
    Ok(ca)
}

fn ensure_leaf(
    ca: &Authority,
    dir: &Path,
    name: &str,
    common_name: &str,
    usage: &Usage,
) -> Result<(), StoreError> {
    let (cert, key) = pair_paths(dir, name);
    if cert.exists() && key.exists() {
        return Ok(());
    }
    let leaf = ca.issue(common_name, usage)?;
    write_secret(&key, &leaf.key_pem)?;
    write_public(&cert, &leaf.cert_pem)?;
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

fn read(path: &Path) -> Result<String, StoreError> {
    fs::read_to_string(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_public(path: &Path, contents: &str) -> Result<(), StoreError> {
    fs::write(path, contents).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_secret(path: &Path, contents: &str) -> Result<(), StoreError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io_error = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error)?;
    file.write_all(contents.as_bytes()).map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bindery-certs-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn cluster_pki_is_complete_and_kept_on_second_run() {
        let out = temp_dir("cluster");
        let pki = ensure_cluster(&out, "provider").unwrap();
        let files = [
            pki.ca(),
            pki.apiserver().0,
            pki.apiserver().1,
            pki.admin().0,
            pki.controller_manager().0,
            pki.front_proxy_ca(),
            pki.front_proxy_client().0,
            pki.service_account().0,
            pki.service_account().1,
        ];
        for file in &files {
            assert!(file.exists(), "{} missing", file.display());
        }
        let before: Vec<String> = files
            .iter()
            .map(|f| fs::read_to_string(f).unwrap())
            .collect();
        ensure_cluster(&out, "provider").unwrap();
        let after: Vec<String> = files
            .iter()
            .map(|f| fs::read_to_string(f).unwrap())
            .collect();
        assert_eq!(before, after, "a second run must keep every file");

        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(pki.admin().1).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "keys are private");
        fs::remove_dir_all(out).unwrap();
    }

    #[test]
    fn clusters_do_not_share_authorities() {
        let out = temp_dir("two");
        let provider = ensure_cluster(&out, "provider").unwrap();
        let app = ensure_cluster(&out, "app").unwrap();
        assert_ne!(
            fs::read_to_string(provider.front_proxy_ca()).unwrap(),
            fs::read_to_string(app.front_proxy_ca()).unwrap()
        );
        assert_ne!(
            fs::read_to_string(provider.ca()).unwrap(),
            fs::read_to_string(provider.front_proxy_ca()).unwrap(),
            "client CA and front-proxy CA must differ"
        );
        fs::remove_dir_all(out).unwrap();
    }

    #[test]
    fn consumer_certificates_share_one_ca() {
        let out = temp_dir("bindery");
        let pki = ensure_bindery(&out, &["bindery.bindery-system.svc".into()], &[]).unwrap();
        let ca_before = fs::read_to_string(pki.consumer_ca()).unwrap();
        ensure_consumer(&pki, "consumer-a").unwrap();
        ensure_consumer(&pki, "consumer-b").unwrap();
        assert_eq!(ca_before, fs::read_to_string(pki.consumer_ca()).unwrap());
        assert!(pki.consumer("consumer-a").1.exists());
        assert!(pki.consumer("consumer-b").0.exists());
        fs::remove_dir_all(out).unwrap();
    }

    #[test]
    fn the_serving_certificate_names_every_aggregation_service_and_is_remade_when_short() {
        let out = temp_dir("serving-names");
        let pki = ensure_bindery(&out, &[], &[]).unwrap();
        let (cert, _) = pki.serving();
        assert!(names_covered(
            &cert,
            &["localhost".into(), "*.kube-bind.svc".into()]
        ));
        let first = fs::read_to_string(&cert).unwrap();
        ensure_bindery(&out, &[], &[]).unwrap();
        assert_eq!(first, fs::read_to_string(&cert).unwrap(), "kept");
        ensure_bindery(&out, &["bindery.example.com".into()], &[]).unwrap();
        assert_ne!(first, fs::read_to_string(&cert).unwrap(), "remade");
        assert!(names_covered(&cert, &["bindery.example.com".into()]));
        fs::remove_dir_all(out).unwrap();
    }
}
