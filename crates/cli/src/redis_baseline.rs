//! `bench --vs-redis`: the key-value store users would pick instead, measured in the same command on the same
//! machine (`redis-server` and `redis-benchmark`, from `apt-get install redis-server`). Skipped with a note
//! when they are not installed.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What `redis-benchmark -t get` printed, in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisGet {
    pub version: String,
    pub connections: usize,
    pub requests: u64,
    pub requests_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    /// The same GETs timed by a plain blocking Rust client in this process (`Instant` around one request
    /// and its reply, as snowline's benchmark times its operations), one connection: p50 and p95 in µs.
    pub rust_client: Option<(f64, f64)>,
}

/// Kills the redis-server it holds when dropped (also when the benchmark fails half-way).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a private redis-server (no persistence, loopback only, a free port), runs `redis-benchmark -t get`
/// with `connections` connections and `requests` requests against it, and stops it. `pin` places them as
/// it placed snowline's servers and clients. `Ok(None)`: not
/// installed.
pub fn measure_get(
    connections: usize,
    requests: u64,
    pin: &crate::pinning::Placement,
) -> anyhow::Result<Option<RedisGet>> {
    let version = match Command::new("redis-server").arg("--version").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or("").replace("v=", ""),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("cannot run redis-server: {e}"),
    };
    if Command::new("redis-benchmark").arg("--version").stdout(Stdio::null()).status().is_err() {
        return Ok(None);
    }
    let port = snowline_net::free_base_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server(child);
    // Placed like snowline's servers; redis-benchmark inherits this process's (the clients') CPUs.
    pin.pin_server(server.0.id())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "redis-server did not start listening on port {port} within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "get", "--csv"])
        .args(["-c", &connections.to_string(), "-n", &requests.to_string()])
        .output()?;
    anyhow::ensure!(out.status.success(), "redis-benchmark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut figures = parse_csv(&text)
        .ok_or_else(|| anyhow::anyhow!("redis-benchmark printed no GET line we understand:\n{text}"))?;
    figures.version = version;
    figures.connections = connections;
    figures.requests = requests;
    figures.rust_client = Some(time_gets(port, requests)?);
    Ok(Some(figures))
}

/// Times `requests` GETs of one stored 3-byte value (redis-benchmark's default size) over one connection
/// with a blocking socket: the leanest client a Rust program could use, timed like snowline's own
/// operations (`Instant` around request and reply). Returns p50 and p95 in microseconds.
fn time_gets(port: u16, requests: u64) -> anyhow::Result<(f64, f64)> {
    use std::io::{Read, Write};
    let mut conn = TcpStream::connect(("127.0.0.1", port))?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = [0u8; 512];
    // Reads until `expected` arrives whole (replies are tiny: one read, bar a split segment).
    let mut exchange = |request: &[u8], expected: &[u8]| -> anyhow::Result<()> {
        conn.write_all(request)?;
        let mut got = 0;
        while got < expected.len() {
            let n = conn.read(&mut buf[got..])?;
            anyhow::ensure!(n > 0, "redis-server closed the connection");
            got += n;
        }
        anyhow::ensure!(&buf[..got] == expected, "unexpected reply {:?}", String::from_utf8_lossy(&buf[..got]));
        Ok(())
    };
    exchange(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$3\r\nxxx\r\n", b"+OK\r\n")?;
    let get = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    let mut took = Vec::with_capacity(requests as usize);
    for _ in 0..requests {
        let start = Instant::now();
        exchange(get, b"$3\r\nxxx\r\n")?;
        took.push(start.elapsed().as_secs_f64() * 1e6);
    }
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    Ok((at(0.50), at(0.95)))
}

/// The `"GET",rps,avg,min,p50,p95,p99,max` line of `redis-benchmark --csv` (latencies in ms).
fn parse_csv(text: &str) -> Option<RedisGet> {
    let line = text.lines().find(|l| l.starts_with("\"GET\""))?;
    let f: Vec<f64> = line.split(',').skip(1).map(|v| v.trim_matches('"').parse().ok()).collect::<Option<_>>()?;
    let [rps, _avg, _min, p50, p95, p99, ..] = f[..] else { return None };
    Some(RedisGet {
        version: String::new(),
        connections: 0,
        requests: 0,
        requests_per_s: rps,
        p50_us: p50 * 1000.0,
        p95_us: p95 * 1000.0,
        p99_us: p99 * 1000.0,
        rust_client: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\
                    \"p99_latency_ms\",\"max_latency_ms\"\n\"GET\",\"14876.52\",\"0.063\",\"0.008\",\"0.063\",\
                    \"0.095\",\"0.119\",\"2.631\"\n";
        let got = parse_csv(text).unwrap();
        assert_eq!((got.requests_per_s, got.p50_us.round(), got.p95_us.round()), (14876.52, 63.0, 95.0));
        assert!(parse_csv("\"SET\",\"1\"\n").is_none());
    }
}
