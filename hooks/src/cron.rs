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
        max: 7,
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
        return if DESCRIPTORS.contains(&s.to_ascii_lowercase().as_str()) {
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

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn schedules_the_controller_accepts() {
        for s in ["0 3 * * *", "*/15 * * * *", "0 0 1,15 * mon-fri", "30 2 * jan-mar 0", "@daily", "0 0 ? * 7"] {
            assert_eq!(check(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn schedules_the_controller_rejects() {
        for s in ["61 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *"] {
            assert!(check(s).is_err(), "{s}");
        }
        assert!(check("@sometimes").is_err());
        assert!(check("TZ=UTC 0 3 * * *").is_err());
        assert!(check("0 3 * *").is_err());
    }
}
