//! A criterion [`Measurement`] of the bench thread's on-CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) instead of wall time: time the thread spends
//! descheduled while other processes run is not counted, so numbers taken on a
//! shared 2-core machine stay comparable between runs.

use std::time::Duration;

use cpu_time::ThreadTime;
use criterion::{
    Throughput,
    measurement::{Measurement, ValueFormatter},
};

pub struct OnCpu;

impl Measurement for OnCpu {
    type Intermediate = ThreadTime;
    type Value = Duration;

    fn start(&self) -> ThreadTime {
        ThreadTime::now()
    }

    fn end(&self, started: ThreadTime) -> Duration {
        started.elapsed()
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_secs_f64() * 1e9
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &Nanoseconds
    }
}

/// Formats nanoseconds as criterion's wall-time formatter does (no throughput).
struct Nanoseconds;

impl ValueFormatter for Nanoseconds {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e-3, "µs")
        } else if typical < 1e9 {
            (1e-6, "ms")
        } else {
            (1e-9, "s")
        };
        for v in values {
            *v *= factor;
        }
        unit
    }

    fn scale_throughputs(&self, _typical: f64, _throughput: &Throughput, _values: &mut [f64]) -> &'static str {
        "(throughput not measured)"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
