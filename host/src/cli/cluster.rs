//! `assignd cluster features`: a cluster's record format level straight
//! from its etcd (no node needs to be up): the level, every live node's
//! support, the highest level they all read and write; with `--set`, the
//! level raised by hand under the cluster's admin token. The rule a level
//! follows is `cluster::features`'s; this file owns the command only.

use clap::{Args, Subcommand};
use sha2::{Digest, Sha256};

use super::{EXIT_BAD_INPUT, Failure};
use crate::cluster::features::{self, ClusterFeatures};
use crate::cluster::{Etcd, EtcdConfig};

#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// The record format version the cluster's nodes write and what each
    /// live node reads and writes, as JSON; with --set, raise it.
    Features(FeaturesArgs),
}

#[derive(Debug, Args)]
struct FeaturesArgs {
    /// The client URLs of the cluster's etcd (comma-separated).
    #[arg(long, value_name = "URLS", value_delimiter = ',', required = true)]
    etcd: Vec<String>,
    /// The cluster's prefix in etcd (as `serve --etcd-prefix`).
    #[arg(long, value_name = "PREFIX", default_value = "/assignd/")]
    etcd_prefix: String,
    /// Raise the level to VERSION: refused below the level (a level is
    /// never lowered), past what any live node reads or writes, and with
    /// no node live. The
    /// nodes raise it by themselves once every live node reads a higher
    /// version; this does it at once.
    #[arg(long, value_name = "VERSION", requires = "admin_token")]
    set: Option<u8>,
    /// The cluster's admin token (as `serve --admin-token`), for --set.
    #[arg(
        long,
        env = "ASSIGND_ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
}

pub fn cluster(args: ClusterArgs) -> Result<(), Failure> {
    let ClusterCommand::Features(args) = args.command;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let etcd = Etcd::connect(EtcdConfig::new(args.etcd.clone(), &args.etcd_prefix))
            .await
            .map_err(|e| failure(format!("cannot reach etcd: {e}")))?;
        let mut cluster = read(&etcd).await?;
        if let (Some(to), Some(token)) = (args.set, &args.admin_token) {
            check_token(&etcd, token).await?;
            set(&etcd, &cluster, to).await?;
            cluster = read(&etcd).await?;
        }
        let mut shown = serde_json::to_value(&cluster).expect("features serialize");
        shown["highest_safe"] = serde_json::json!(cluster.highest_safe());
        outln!(
            "{}",
            serde_json::to_string_pretty(&shown).expect("JSON prints")
        );
        Ok(())
    })
}

async fn read(etcd: &Etcd) -> Result<ClusterFeatures, Failure> {
    features::read(etcd)
        .await
        .map_err(|e| failure(format!("cannot read the cluster's features: {e}")))
}

/// Sets the level to `to` if every live node reads and writes it; a
/// node that registered meanwhile makes it read again and retry.
async fn set(etcd: &Etcd, cluster: &ClusterFeatures, to: u8) -> Result<(), Failure> {
    let mut cluster = cluster.clone();
    loop {
        if to == cluster.format_version {
            return Ok(());
        }
        if let Some(reason) = cluster.refuse(to) {
            return Err(failure(format!("cannot set format version {to}: {reason}")));
        }
        let set = features::set_level(etcd, &cluster, to)
            .await
            .map_err(|e| failure(format!("cannot set the format version: {e}")))?;
        if set {
            return Ok(());
        }
        cluster = read(etcd).await?;
    }
}

/// The token must be the cluster's: its digest is what the first node
/// wrote.
async fn check_token(etcd: &Etcd, token: &str) -> Result<(), Failure> {
    let held = etcd
        .get(&etcd.key("admin-token-sha256"))
        .await
        .map_err(|e| failure(format!("cannot read the cluster's admin token: {e}")))?;
    let digest: String = Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    match held {
        Some((held, _)) if held == digest.as_bytes() => Ok(()),
        Some(_) => Err(failure(
            "--admin-token is not this cluster's admin token".into(),
        )),
        None => Err(failure(
            "no node has joined this cluster yet (no admin token in etcd under this prefix)".into(),
        )),
    }
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}
