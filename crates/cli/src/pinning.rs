//! `bench --pin`: where the benchmark's processes run. On a small machine a request's latency at low load
//! is mostly how soon the kernel wakes the process on the other end, and that depends on whether client and
//! server share a core (the scheduler decides, differently from run to run). Pinning both sides makes the
//! figure repeatable, and `--vs-redis` pins redis-server and redis-benchmark the same way as snowline's
//! servers and clients, so the two are compared under one placement.

use anyhow::{Context, Result};

/// Which CPUs servers and clients get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pinning {
    /// Wherever the scheduler puts them.
    #[default]
    Off,
    /// Servers on the first CPU, clients on the others: a request always crosses cores, as it crosses
    /// machines in a deployment.
    Split,
    /// Everything on the first CPU: no cross-core wakeups at all.
    Same,
}

impl std::str::FromStr for Pinning {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "off" => Ok(Pinning::Off),
            "split" => Ok(Pinning::Split),
            "same" => Ok(Pinning::Same),
            other => Err(format!("unknown pinning {other:?} (off, split or same)")),
        }
    }
}

impl std::fmt::Display for Pinning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pinning::Off => "off",
            Pinning::Split => "split",
            Pinning::Same => "same",
        })
    }
}

impl Pinning {
    /// Which CPUs servers and clients get, chosen among those this process may use now (so resolve it
    /// once, before pinning anything).
    pub fn place(self) -> Result<Placement> {
        if self == Pinning::Off {
            return Ok(Placement::default());
        }
        let mine = allowed_cpus(0)?;
        let first = *mine.first().context("this process may run on no CPU")?;
        Ok(match self {
            Pinning::Off => Placement::default(),
            Pinning::Same => Placement { servers: vec![first], clients: vec![first] },
            Pinning::Split => {
                anyhow::ensure!(mine.len() >= 2, "--pin split needs two CPUs; this process may use only CPU {first}");
                Placement { servers: vec![first], clients: mine[1..].to_vec() }
            }
        })
    }
}

/// The CPUs of servers and of clients; empty: not pinned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    servers: Vec<usize>,
    clients: Vec<usize>,
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.servers.is_empty() {
            f.write_str("processes not pinned (the scheduler places them)")
        } else {
            write!(f, "servers pinned to CPU {:?}, clients to CPU {:?}", self.servers, self.clients)
        }
    }
}

impl Placement {
    pub fn is_pinned(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Pins every thread of this process (the benchmark's clients; what it starts later inherits it).
    pub fn pin_clients(&self) -> Result<()> {
        if self.is_pinned() {
            pin_process(std::process::id(), &self.clients)?;
        }
        Ok(())
    }

    /// Pins every thread of the server process `pid`.
    pub fn pin_server(&self, pid: u32) -> Result<()> {
        if self.is_pinned() {
            pin_process(pid, &self.servers)?;
        }
        Ok(())
    }
}

/// The CPUs thread `tid` may run on (0: the calling thread).
fn allowed_cpus(tid: i32) -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    anyhow::ensure!(rc == 0, "sched_getaffinity: {}", std::io::Error::last_os_error());
    // SAFETY: CPU_ISSET reads the set initialised above, for indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Sets the affinity of every thread of process `pid` (threads it creates later inherit it).
fn pin_process(pid: u32, cpus: &[usize]) -> Result<()> {
    // SAFETY: as above; CPU_SET writes inside the zeroed set for indices below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).with_context(|| format!("listing threads of {pid}"))?;
    for task in tasks {
        let Some(tid) = task?.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else { continue };
        // SAFETY: sched_setaffinity reads size_of::<cpu_set_t>() bytes of the set initialised above.
        let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        // A thread that exited since the listing is no error.
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) {
            anyhow::bail!("pinning thread {tid} of process {pid} to CPU {cpus:?}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_a_child_and_reads_it_back() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let mine = allowed_cpus(0).unwrap();
        pin_process(child.id(), &mine[..1]).unwrap();
        assert_eq!(allowed_cpus(child.id() as i32).unwrap(), mine[..1].to_vec());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!("split".parse::<Pinning>(), Ok(Pinning::Split));
        assert!("both".parse::<Pinning>().unwrap_err().contains("off, split or same"));
    }
}
