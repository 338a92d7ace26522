//! The host process on this machine, read from /proc: its CPU time, its
//! resident memory and the bytes it read and wrote through system calls
//! (sockets included), for the load tests given `--host-pid`. It reads
//! only; nothing here knows what a figure is for.

/// A process, by its id.
#[derive(Clone, Copy, Debug)]
pub struct HostProcess(pub u32);

/// Bytes a process moved through read and write calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Io {
    /// `rchar`: read by read(2), recv(2) and the like.
    pub read: u64,
    /// `wchar`: written by write(2), send(2) and the like.
    pub written: u64,
}

impl HostProcess {
    /// utime + stime, in seconds.
    pub fn cpu_s(self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf reads a constant of the system.
        let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (per_s > 0).then(|| ticks as f64 / per_s as f64)
    }

    /// VmRSS, in KiB.
    pub fn rss_kib(self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0)).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    }

    /// The bytes it read and wrote so far (/proc/PID/io: only its owner
    /// may read it).
    pub fn io(self) -> Option<Io> {
        let text = std::fs::read_to_string(format!("/proc/{}/io", self.0)).ok()?;
        parse_io(&text)
    }
}

fn parse_io(text: &str) -> Option<Io> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().parse().ok())
    };
    Some(Io {
        read: field("rchar")?,
        written: field("wchar")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_reads_rchar_and_wchar() {
        let text = "rchar: 1200\nwchar: 345\nsyscr: 7\nsyscw: 3\nread_bytes: 0\n";
        assert_eq!(
            parse_io(text),
            Some(Io {
                read: 1200,
                written: 345
            })
        );
        assert_eq!(parse_io("syscr: 7\n"), None);
    }

    #[test]
    fn this_process_reads_itself() {
        let me = HostProcess(std::process::id());
        assert!(me.cpu_s().is_some());
        assert!(me.rss_kib().unwrap() > 0);
        assert!(me.io().is_some());
    }
}
