//! The ceiling of the heartbeat benchmark (host/benches/heartbeat_ratio.py):
//! an axum server with the member route `POST /v1/groups/{group}/heartbeat`
//! and nothing behind it (`bare_heartbeat/handler.rs`, which the in-process
//! bench host/benches/http_stack.rs drives too). It parses a member's
//! heartbeat body and answers a body of the shape and size assignd answers
//! a settled member, both with assignd's own wire types, so what it costs
//! is what HTTP and JSON alone cost on this machine. It owns no state and
//! checks nothing of the protocol. It allocates with jemalloc, as the
//! `assignd` binary does, so that the ratio compares request paths, not
//! allocators.
//!
//!     cargo build --release -p assignd --example bare_heartbeat
//!     target/release/examples/bare_heartbeat --listen 127.0.0.1:0
//!
//! It prints `listening on http://ADDR` (the real address) as
//! `assignd serve` does, and serves until killed.

#[path = "bare_heartbeat/handler.rs"]
mod handler;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn listen_address() -> Result<String, String> {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:7071".to_string();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an ADDR")?,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: bare_heartbeat [--listen ADDR]"
                ));
            }
        }
    }
    Ok(listen)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    let listen = match listen_address() {
        Ok(listen) => listen,
        Err(message) => {
            eprintln!("bare_heartbeat: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("bare_heartbeat: cannot listen on {listen}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let address = listener
        .local_addr()
        .expect("a bound listener has an address");
    println!("listening on http://{address}");
    if let Err(e) = axum::serve(listener, handler::router()).await {
        eprintln!("bare_heartbeat: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
