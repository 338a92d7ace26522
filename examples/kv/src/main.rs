//! `assignd-kv`: a small sharded key-value service on assignd, and the
//! load that proves it loses nothing while its workers come and go
//! (README.md walks through it).
//!
//! - `worker`: a member of the group; serves the keys of the partitions
//!   it owns, their writes durable in shared changelogs (`worker`,
//!   `store`, `changelog`).
//! - `router`: an HTTP front that forwards each key to its owner by the
//!   group's routing table (`router`).
//! - `load`: PUTs and GETs through the router, counting refused and lost
//!   requests (`load`).

mod changelog;
mod http;
mod load;
mod router;
mod signals;
mod store;
mod worker;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "assignd-kv", about = "A sharded key-value service on assignd")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A member that owns partitions of topic `kv` and serves their keys.
    Worker(worker::Args),
    /// An HTTP front that forwards each key to its owner.
    Router(router::Args),
    /// PUTs and GETs through the router; exits 1 if an acknowledged write is lost.
    Load(load::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Worker(args) => worker::run(args).await,
        Command::Router(args) => router::run(args).await,
        Command::Load(args) => load::run(args).await,
    }
}
