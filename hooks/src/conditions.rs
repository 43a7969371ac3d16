//! Standard `metav1.Condition`s that do not flap.
//!
//! `lastTransitionTime` is carried over from the observed status unless the
//! condition's status really changed: a status that changed on every call (a fresh
//! "now") would make every sync trigger another one.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// Builds conditions against the previously observed ones.
pub struct Conditions<'a> {
    previous: &'a [Condition],
    now: Timestamp,
    out: Vec<Condition>,
}

impl<'a> Conditions<'a> {
    #[must_use]
    pub fn new(previous: &'a [Condition], now: Timestamp) -> Self {
        Self { previous, now, out: Vec::new() }
    }

    /// Sets condition `type_`.
    pub fn set(&mut self, type_: &str, status: bool, reason: &str, message: impl Into<String>) {
        let status = if status { "True" } else { "False" };
        let last_transition_time = self
            .previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or(Time(self.now), |c| c.last_transition_time.clone());
        self.out.push(Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.into(),
            last_transition_time,
            observed_generation: None,
        });
    }

    /// Carries condition `type_` over unchanged from the observed status: for a fact
    /// recorded once (how the cluster was bootstrapped) whose evidence is gone.
    /// Returns false when there is nothing to carry over.
    pub fn keep(&mut self, type_: &str) -> bool {
        match self.previous.iter().find(|c| c.type_ == type_) {
            Some(c) => {
                self.out.push(c.clone());
                true
            }
            None => false,
        }
    }

    /// The conditions, sorted by type.
    #[must_use]
    pub fn finish(mut self) -> Vec<Condition> {
        self.out.sort_by(|a, b| a.type_.cmp(&b.type_));
        self.out
    }
}

/// Whether condition `type_` is True in `conditions`.
#[must_use]
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut first = Conditions::new(&[], at("2026-01-01T00:00:00Z"));
        first.set("Ready", false, "Starting", "a");
        let first = first.finish();
        let mut same = Conditions::new(&first, at("2026-01-01T00:05:00Z"));
        same.set("Ready", false, "StillStarting", "b");
        let same = same.finish();
        assert_eq!(same[0].last_transition_time, first[0].last_transition_time);
        let mut flipped = Conditions::new(&same, at("2026-01-01T00:06:00Z"));
        flipped.set("Ready", true, "Running", "c");
        assert_eq!(flipped.finish()[0].last_transition_time.0, at("2026-01-01T00:06:00Z"));
    }
}
