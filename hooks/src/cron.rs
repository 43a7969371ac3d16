//! Cron schedules as the CronJob controller parses them (robfig/cron v3's standard
//! parser: five fields or a `@descriptor`), checked before a CronJob is emitted.
//!
//! The CRD's pattern only checks the shape; a schedule like `61 * * * *` passes
//! it, the API server then rejects the CronJob on every sync, and no backup ever
//! runs. Checked here, such a spec is refused by name in `SpecAccepted` instead.

/// One field: its name, bounds and the names it accepts (index + offset = value).
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    names_from: u32,
}

const FIELDS: [Field; 5] = [
    Field { name: "minute", min: 0, max: 59, names: &[], names_from: 0 },
    Field { name: "hour", min: 0, max: 23, names: &[], names_from: 0 },
    Field { name: "day of month", min: 1, max: 31, names: &[], names_from: 0 },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
        names_from: 1,
    },
    Field {
        name: "day of week",
        min: 0,
        // robfig/cron v3 (the API server's parser) stops at 6: `7` for Sunday,
        // which other crons take, is refused there on every sync.
        max: 6,
        names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
        names_from: 0,
    },
];

const DESCRIPTORS: [&str; 7] = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"];

/// Checks a schedule; the reason when the CronJob controller would reject it.
///
/// # Errors
/// Which field is wrong and why.
pub fn check(schedule: &str) -> Result<(), String> {
    let s = schedule.trim();
    if s.starts_with('@') {
        // Case matters: robfig/cron knows `@daily`, not `@Daily`.
        return if DESCRIPTORS.contains(&s) {
            Ok(())
        } else {
            Err(format!("{s:?} is not one of {}", DESCRIPTORS.join(", ")))
        };
    }
    if s.contains("TZ=") || s.contains("CRON_TZ=") {
        return Err("a time zone inside the schedule is not allowed (schedules run in UTC)".to_owned());
    }
    let parts: Vec<&str> = s.split_whitespace().collect();
    if parts.len() != FIELDS.len() {
        return Err(format!("{} fields; a schedule has 5 (minute hour day-of-month month day-of-week)", parts.len()));
    }
    for (text, field) in parts.iter().zip(&FIELDS) {
        for item in text.split(',') {
            item_ok(item, field).map_err(|why| format!("{} field {text:?}: {why}", field.name))?;
        }
    }
    Ok(())
}

fn item_ok(item: &str, f: &Field) -> Result<(), String> {
    let (range, step) = match item.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (item, None),
    };
    if let Some(step) = step {
        let n: u32 = step.parse().map_err(|_| format!("step {step:?} is not a number"))?;
        if n == 0 || n > f.max {
            return Err(format!("step {n} is out of range 1..{}", f.max));
        }
    }
    if range == "*" || range == "?" {
        return Ok(());
    }
    let (lo, hi) = match range.split_once('-') {
        Some((a, b)) => (value(a, f)?, value(b, f)?),
        None => {
            let v = value(range, f)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(format!("range {range:?} runs backwards"));
    }
    Ok(())
}

fn value(text: &str, f: &Field) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = f.names.iter().position(|n| *n == lower) {
        return Ok(u32::try_from(i).unwrap_or(0) + f.names_from);
    }
    let v: u32 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if v < f.min || v > f.max {
        return Err(format!("{v} is out of range {}..{}", f.min, f.max));
    }
    Ok(v)
}

/// The first run of `schedule` strictly after `after` (UTC, whole minutes), as the
/// CronJob controller (robfig/cron v3) would start it; `None` for a schedule
/// [`check`] refuses or one with no run in the next five years (`0 0 30 2 *`).
///
/// Day of month and day of week combine as in cron: when both are restricted a day
/// matching either runs; when either is `*` or `?`, both must match.
#[must_use]
pub fn next_after(schedule: &str, after: k8s_openapi::jiff::Timestamp) -> Option<k8s_openapi::jiff::Timestamp> {
    use k8s_openapi::jiff::{Timestamp, tz::TimeZone};
    check(schedule).ok()?;
    let spec = Spec::parse(schedule)?;
    let start = Timestamp::from_second(after.as_second().div_euclid(60).checked_add(1)?.checked_mul(60)?).ok()?;
    let first = start.to_zoned(TimeZone::UTC).datetime();
    let mut date = first.date();
    // Five years, like robfig/cron, so that 29 February is always found.
    for _ in 0..(5 * 366) {
        if spec.runs_on(date) {
            let today = date == first.date();
            for hour in 0..24u32 {
                let h = i8::try_from(hour).ok()?;
                if spec.hours & (1 << hour) == 0 || (today && h < first.hour()) {
                    continue;
                }
                for minute in 0..60u32 {
                    let m = i8::try_from(minute).ok()?;
                    if spec.minutes & (1 << minute) == 0 || (today && h == first.hour() && m < first.minute()) {
                        continue;
                    }
                    return date.at(h, m, 0, 0).to_zoned(TimeZone::UTC).ok().map(|z| z.timestamp());
                }
            }
        }
        date = date.tomorrow().ok()?;
    }
    None
}

/// A checked schedule as bit sets (bit n: value n runs).
struct Spec {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day of month or day of week was `*` / `?`: both must then match.
    any_day: bool,
}

impl Spec {
    fn parse(schedule: &str) -> Option<Self> {
        let s = schedule.trim().to_ascii_lowercase();
        let expanded = match s.as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let [mi, h, dom, mo, dow] = parts.as_slice() else { return None };
        let (minutes, _) = bits(mi, &FIELDS[0])?;
        let (hours, _) = bits(h, &FIELDS[1])?;
        let (days, dom_star) = bits(dom, &FIELDS[2])?;
        let (months, _) = bits(mo, &FIELDS[3])?;
        let (weekdays, dow_star) = bits(dow, &FIELDS[4])?;
        Some(Self { minutes, hours, days, months, weekdays, any_day: dom_star || dow_star })
    }

    fn runs_on(&self, date: k8s_openapi::jiff::civil::Date) -> bool {
        let bit = |set: u64, v: i8| u32::try_from(v).is_ok_and(|v| v < 64 && set & (1 << v) != 0);
        if !bit(self.months, date.month()) {
            return false;
        }
        let dom = bit(self.days, date.day());
        let dow = bit(self.weekdays, date.weekday().to_sunday_zero_offset());
        if self.any_day { dom && dow } else { dom || dow }
    }
}

/// The values one field runs at, and whether it was an unstepped `*` / `?` (which
/// robfig/cron treats as "any day" when combining the two day fields).
fn bits(text: &str, f: &Field) -> Option<(u64, bool)> {
    let mut set = 0u64;
    let mut star = false;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok()?),
            None => (item, 1),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            star |= step == 1;
            (f.min, f.max)
        } else {
            match range.split_once('-') {
                Some((a, b)) => (value(a, f).ok()?, value(b, f).ok()?),
                // `n/step` runs from n to the field's maximum.
                None if step > 1 => (value(range, f).ok()?, f.max),
                None => {
                    let v = value(range, f).ok()?;
                    (v, v)
                }
            }
        };
        let mut v = lo;
        while v <= hi {
            set |= 1 << v;
            v += step.max(1);
        }
    }
    Some((set, star))
}

#[cfg(test)]
mod tests {
    use super::{check, next_after};
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn schedules_the_controller_accepts() {
        for s in ["0 3 * * *", "*/15 * * * *", "0 0 1,15 * mon-fri", "30 2 * jan-mar 0", "@daily", "0 0 ? * 6"] {
            assert_eq!(check(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn schedules_the_controller_rejects() {
        for s in [
            "61 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "* * * * 0-7",
            "*/0 * * * *",
            "5-1 * * * *",
        ] {
            assert!(check(s).is_err(), "{s}");
        }
        assert!(check("@sometimes").is_err());
        assert!(check("@Daily").is_err());
        assert!(check("TZ=UTC 0 3 * * *").is_err());
        assert!(check("0 3 * *").is_err());
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn next_runs() {
        let cases = [
            ("0 3 * * *", "2026-11-29T12:00:00Z", "2026-11-30T03:00:00Z"),
            ("0 3 * * *", "2026-11-30T02:59:59Z", "2026-11-30T03:00:00Z"),
            // Strictly after: a run at exactly `after` is not the next one.
            ("0 3 * * *", "2026-11-30T03:00:00Z", "2026-12-01T03:00:00Z"),
            ("*/15 * * * *", "2026-11-29T12:07:30Z", "2026-11-29T12:15:00Z"),
            ("@hourly", "2026-11-29T23:30:00Z", "2026-11-30T00:00:00Z"),
            ("@weekly", "2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"),
            ("@monthly", "2026-12-15T00:00:00Z", "2027-01-01T00:00:00Z"),
            ("30 2 * jan-mar 0", "2026-11-29T12:00:00Z", "2027-01-03T02:30:00Z"),
            // Both day fields restricted: either matches (the 1st, or a Friday).
            ("0 0 1 * fri", "2026-11-29T12:00:00Z", "2026-12-01T00:00:00Z"),
            ("0 0 1 * fri", "2026-12-01T12:00:00Z", "2026-12-04T00:00:00Z"),
            // `5/20` runs at 5, 25, 45.
            ("5/20 4 * * 0", "2026-11-29T04:30:00Z", "2026-11-29T04:45:00Z"),
            ("0 0 29 2 *", "2026-11-29T12:00:00Z", "2028-02-29T00:00:00Z"),
        ];
        for (schedule, after, want) in cases {
            assert_eq!(next_after(schedule, at(after)), Some(at(want)), "{schedule} after {after}");
        }
        assert_eq!(next_after("0 0 30 2 *", at("2026-11-29T12:00:00Z")), None);
        assert_eq!(next_after("61 * * * *", at("2026-11-29T12:00:00Z")), None);
    }
}
