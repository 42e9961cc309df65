//! What reading one file may hold in memory, whatever the file says: three quarters of this
//! machine's memory (its physical memory, or its container's limit where that is lower). A file
//! too big for the machine is refused with an error naming it, before the kernel kills the
//! process or a failed allocation aborts it, and the open work in the window survives.
//!
//! Readers compare what they hold with [`limit_bytes`] as they go (the unpickler every 65,536
//! opcodes, the msMemScope CSV reader every 4,096 rows of any piece). `MEMSIGHT_MEMORY_LIMIT`
//! (bytes, or with a `K`, `M` or `G` suffix: binary units) sets another bound, for a shared
//! machine or a test.

use std::sync::OnceLock;

use crate::units::format_bytes;

/// The environment variable that sets the bound.
pub const LIMIT_VAR: &str = "MEMSIGHT_MEMORY_LIMIT";

/// The bound and where it comes from, read once.
struct Limit {
    bytes: u64,
    /// "three quarters of this machine's 23.4 GiB", "the bound `MEMSIGHT_MEMORY_LIMIT` sets".
    source: String,
}

fn limit() -> &'static Limit {
    static LIMIT: OnceLock<Limit> = OnceLock::new();
    LIMIT.get_or_init(|| {
        if let Some(bytes) = std::env::var(LIMIT_VAR).ok().and_then(|v| parse_bytes(&v)) {
            return Limit {
                bytes,
                source: format!("the bound {LIMIT_VAR} sets"),
            };
        }
        match machine_bytes() {
            Some(machine) => Limit {
                bytes: machine / 4 * 3,
                source: format!(
                    "three quarters of this machine's {} of memory",
                    format_bytes(machine as i64)
                ),
            },
            None => Limit {
                bytes: u64::MAX,
                source: "no bound".to_string(),
            },
        }
    })
}

/// What one file's reading may hold, in bytes.
pub fn limit_bytes() -> u64 {
    limit().bytes
}

/// `None` while `held_bytes` is within the bound; else the reason to refuse the file, for its
/// error message ("reading it needs more than 17.6 GiB, three quarters of …").
pub fn exceeded(held_bytes: u64) -> Option<String> {
    let limit = limit();
    (held_bytes > limit.bytes).then(|| {
        format!(
            "reading it needs more than {}, {} (set {LIMIT_VAR} to change the bound): too big to \
             open on this machine",
            format_bytes(limit.bytes as i64),
            limit.source
        )
    })
}

/// This machine's memory: the physical memory, or the cgroup's limit where lower (Linux); `None`
/// where neither can be read.
fn machine_bytes() -> Option<u64> {
    let physical = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    });
    let container = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    match (physical, container) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

/// "1048576", "64M", "2G", "512k" (binary units) as bytes.
fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 10),
        (i, 'm' | 'M') => (&text[..i], 20),
        (i, 'g' | 'G') => (&text[..i], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn bounds_are_read_in_binary_units() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("64M"), Some(64 << 20));
        assert_eq!(parse_bytes("2g"), Some(2 << 30));
        assert_eq!(parse_bytes(" 512k "), Some(512 << 10));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("99999999999999G"), None);
    }
}
