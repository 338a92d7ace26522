//! Heartbeats one process drives with many members of this client, and the
//! CPU they cost: the Rust side of `clients/bench.sh`, which runs the same
//! driver of every client against one host, side by side.
//!
//! ```text
//! cargo run --release -p assignd-client --example bench -- \
//!     --url http://127.0.0.1:7070 --group b --members 1000 --topics orders --duration 10
//! ```
//!
//! It starts `--members` dynamic members (each with its own connection, the
//! client's default), waits until all joined and `--warmup` seconds more,
//! counts the heartbeats answered and failed and the process's CPU time
//! over `--duration` seconds, leaves, and prints one JSON line.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use assignd_client::{ClientError, Event, HeartbeatObserver, Member, MemberConfig, NoLags};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Heartbeats/s and CPU of many members of the Rust client in one process")]
struct Args {
    #[arg(long)]
    url: String,
    #[arg(long)]
    group: String,
    #[arg(long, default_value_t = 1000)]
    members: usize,
    #[arg(long, default_value = "orders")]
    topics: String,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds between the last join and the measurement.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
}

/// How long every member may take to join.
const JOIN_WITHIN: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl HeartbeatObserver for Counts {
    fn heartbeat(&self, _latency: Duration, result: Result<(), &ClientError>) {
        let count = if result.is_ok() {
            &self.ok
        } else {
            &self.failed
        };
        count.fetch_add(1, Ordering::Relaxed);
    }
}

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let counts = Arc::new(Counts::default());
    let (joined_tx, mut joined) = tokio::sync::mpsc::unbounded_channel();
    let mut handles = Vec::with_capacity(args.members);
    for _ in 0..args.members {
        let config = MemberConfig::new(&args.url, &args.group, args.topics.split(','));
        let (member, mut events) = Member::start_observed(config, NoLags, counts.clone())?;
        let joined_tx = joined_tx.clone();
        // Revocations are released at once: the application holds nothing.
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    Event::Joined { .. } => {
                        let _ = joined_tx.send(());
                    }
                    Event::Revoked { ack, .. } => ack.ack(),
                    _ => {}
                }
            }
        });
        handles.push(member);
    }
    let deadline = tokio::time::Instant::now() + JOIN_WITHIN;
    for n in 0..args.members {
        if tokio::time::timeout_at(deadline, joined.recv())
            .await
            .is_err()
        {
            eprintln!(
                "error: {n} of {} members joined within {JOIN_WITHIN:?}",
                args.members
            );
            std::process::exit(1);
        }
    }
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let (ok, failed) = (
        counts.ok.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed),
    );
    let (started, cpu) = (Instant::now(), cpu_time());
    tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_s = (cpu_time() - cpu).as_secs_f64();
    let heartbeats = counts.ok.load(Ordering::Relaxed) - ok;
    let errors = counts.failed.load(Ordering::Relaxed) - failed;
    let leaves: Vec<_> = handles
        .into_iter()
        .map(|m| tokio::spawn(m.leave()))
        .collect();
    for leave in leaves {
        let _ = leave.await;
    }
    let members = args.members as f64;
    println!(
        "{}",
        serde_json::json!({
            "client": "rust",
            "members": args.members,
            "seconds": seconds,
            "heartbeats": heartbeats,
            "errors": errors,
            "heartbeats_per_s": heartbeats as f64 / seconds,
            "cpu_s": cpu_s,
            "cpu_ms_per_member_per_min": cpu_s * 1000.0 / members / (seconds / 60.0),
        })
    );
    Ok(())
}
