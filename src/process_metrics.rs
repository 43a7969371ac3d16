//! The standard `process_*` metrics (the names every Prometheus client library
//! uses), read from `/proc/self` at each scrape. Where `/proc` is missing (not
//! Linux) nothing is written.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, NoLabelSet},
    metrics::MetricType,
};

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`): 100 on every
/// Linux architecture the hook is built for.
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc` says about this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub cpu_seconds: f64,
    pub resident_bytes: f64,
    pub virtual_bytes: f64,
    pub threads: f64,
    pub start_time_seconds: f64,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl Sample {
    /// Reads `/proc/self`; `None` without it.
    #[must_use]
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
        let mut sample = Self::parse(&stat, &boot, &limits)?;
        sample.open_fds = open_fds;
        Some(sample)
    }

    /// Parses `/proc/self/stat`, `/proc/stat` (for the boot time) and
    /// `/proc/self/limits`.
    #[must_use]
    pub fn parse(stat: &str, proc_stat: &str, limits: &str) -> Option<Self> {
        // The command name (field 2) is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        // Numbered as in proc(5): field 3 (state) is fields[0].
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        let boot_time = proc_stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse::<f64>().ok()?;
        let max_fds = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<f64>().ok());
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) / TICKS_PER_SECOND,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page_size(),
            threads: field(20)?,
            start_time_seconds: boot_time + field(22)? / TICKS_PER_SECOND,
            open_fds: None,
            max_fds,
        })
    }
}

/// The page size `rss` is counted in: 4 KiB on x86-64 and on the usual arm64
/// kernels.
fn page_size() -> f64 {
    4096.0
}

/// Renders [`Sample::read`] at every scrape.
#[derive(Debug, Default)]
pub struct ProcessMetrics;

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = Sample::read() else { return Ok(()) };
        let mut gauge = |name: &str, help: &str, value: Option<f64>| -> Result<(), std::fmt::Error> {
            if let Some(v) = value {
                encoder.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&v)?;
            }
            Ok(())
        };
        gauge("process_resident_memory_bytes", "Resident memory size in bytes", Some(s.resident_bytes))?;
        gauge("process_virtual_memory_bytes", "Virtual memory size in bytes", Some(s.virtual_bytes))?;
        gauge(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch in seconds",
            Some(s.start_time_seconds),
        )?;
        gauge("process_threads", "Number of OS threads in the process", Some(s.threads))?;
        gauge("process_open_fds", "Number of open file descriptors", s.open_fds)?;
        gauge("process_max_fds", "Maximum number of open file descriptors", s.max_fds)?;
        encoder
            .encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&s.cpu_seconds, None)
    }
}

#[cfg(test)]
mod tests {
    use super::Sample;

    #[test]
    fn parses_proc() {
        let stat = "4242 (mysql hook) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let proc_stat = "cpu  1 2 3\nbtime 1764460800\nprocesses 10\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        let s = Sample::parse(stat, proc_stat, limits).unwrap_or_default();
        assert!((s.cpu_seconds - 3.0).abs() < 1e-9);
        assert!((s.threads - 7.0).abs() < 1e-9);
        assert!((s.start_time_seconds - 1_764_460_923.45).abs() < 1e-6);
        assert!((s.virtual_bytes - 104_857_600.0).abs() < 1e-9);
        assert!((s.resident_bytes - 2560.0 * 4096.0).abs() < 1e-9);
        assert_eq!(s.max_fds, Some(1_048_576.0));
    }

    #[test]
    fn reads_this_process() {
        if std::path::Path::new("/proc/self/stat").exists() {
            let s = Sample::read().unwrap_or_default();
            assert!(s.threads >= 1.0 && s.resident_bytes > 0.0 && s.open_fds.unwrap_or(0.0) > 0.0);
        }
    }
}
