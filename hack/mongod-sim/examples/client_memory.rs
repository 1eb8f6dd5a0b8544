//! How much resident memory one Rust driver client to a member costs (the
//! operator's memory at scale: BENCHMARKS.md): starts one mongod-sim member in
//! this process, opens 500 direct clients to it with the operator's monitor
//! frequency, pings through each, and prints the growth of `VmRSS` per
//! client (the member's side of the connections, in the same process,
//! included). `cargo run --release -p mongod-sim --example client_memory`
use mongod_sim::{MemberSpec, Network, Volume};
use mongodb::bson::doc;
use mongodb::options::{ClientOptions, ServerAddress};
use std::time::Duration;

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::main]
async fn main() {
    let network = Network::new();
    let listen = "127.199.0.1:27017".parse().unwrap();
    network
        .start_member(MemberSpec::new(listen, "rs"), Volume::new())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let base = rss();
    let mut clients = Vec::new();
    let n = 500;
    for _ in 0..n {
        let options = ClientOptions::builder()
            .hosts(vec![ServerAddress::Tcp {
                host: "127.199.0.1".into(),
                port: Some(27017),
            }])
            .direct_connection(true)
            .heartbeat_freq(Duration::from_secs(30))
            .build();
        let client = mongodb::Client::with_options(options).unwrap();
        client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap();
        clients.push(client);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with = rss();
    println!(
        "{n} clients: {} KiB more, {} KiB each",
        with - base,
        (with - base) / n
    );
    drop(clients);
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("after drop: {} KiB above base", rss() as i64 - base as i64);
}
