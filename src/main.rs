//! The `bindery` command line: one binary, one subcommand per job.
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "bindery",
    version,
    about = "Serve provider-cluster APIs to app clusters without copying them"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make the development PKI: test-cluster CAs and certificates, bindery's
    /// serving certificate and consumer client certificates. Existing files are kept.
    Certs(CertsArgs),
}

#[derive(clap::Args)]
struct CertsArgs {
    /// Directory to write into (git-ignored by default).
    #[arg(long, default_value = "certs/generated")]
    out: PathBuf,
    /// Test clusters to make a PKI for.
    #[arg(long = "cluster", default_values = ["provider", "app"])]
    clusters: Vec<String>,
    /// Extra DNS names for bindery's serving certificate (the aggregator
    /// verifies `<service>.<namespace>.svc`).
    #[arg(long = "server-dns", default_values = ["bindery.bindery-system.svc", "*.bindery-system.svc"])]
    server_dns: Vec<String>,
    /// Extra IP addresses for bindery's serving certificate.
    #[arg(long = "server-ip")]
    server_ips: Vec<IpAddr>,
    /// Consumers to issue a client certificate for.
    #[arg(long = "consumer")]
    consumers: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Certs(args) => certs(args),
    }
}

fn certs(args: CertsArgs) -> anyhow::Result<()> {
    for cluster in &args.clusters {
        let pki = bindery::certs::ensure_cluster(&args.out, cluster)
            .with_context(|| format!("making the PKI of cluster {cluster}"))?;
        println!("cluster {cluster}: {}", pki.dir.display());
    }
    let pki = bindery::certs::ensure_bindery(&args.out, &args.server_dns, &args.server_ips)
        .context("making bindery's PKI")?;
    println!("bindery: {}", pki.dir.display());
    for consumer in &args.consumers {
        let cert = bindery::certs::ensure_consumer(&pki, consumer)
            .with_context(|| format!("making the client certificate of consumer {consumer}"))?;
        println!("consumer {consumer}: {}", cert.display());
    }
    Ok(())
}
