//! Which server version changes a rollout may make.
//!
//! "From" is the newest version any server of the cluster has run (see
//! [`crate::memory`]), not the one the spec or status names: once one server has
//! started on a new version its data dictionary may be upgraded, so a revert in
//! the middle of an upgrade is a downgrade from the new version.
//!
//! Upgrades: a data directory can be opened by the next release series up, and
//! upgrades must not skip a series. For MySQL the series are 5.7, 8.0, the 8.1–8.3
//! innovation releases, 8.4 LTS, then 9.x: 5.7 goes only to 8.0, 8.x to a later
//! 8.y, and only 8.4 to 9.x. For MariaDB any later minor of the same major, or the
//! next major, is allowed.
//!
//! Downgrades in place follow each flavor's documented rules: never to an older
//! series; within a series, MySQL allows them in the 8.4 LTS series, in 8.0 only
//! between releases from 8.0.35 on (MySQL 8.4 Reference Manual, ch. 4 "Downgrading
//! MySQL"; 8.0 manual: "in-place downgrades are supported within the 8.0 series as
//! of 8.0.35"), in 5.7, and never within an innovation series; MariaDB between
//! patch releases of one series.

use crate::api::Flavor;

/// `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Parses `major.minor.patch` (a suffix after the patch, as in `8.4.3-oracle`, is
    /// ignored).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.splitn(3, '.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
        Some(Self(major, minor, patch.parse().ok()?))
    }

    /// The version in the tag of an image reference `repo:tag` (or `repo:tag@digest`).
    #[must_use]
    pub fn of_image(image: &str) -> Option<Self> {
        let name = image.split('@').next()?;
        let (repo, tag) = name.rsplit_once(':')?;
        if repo.is_empty() || tag.contains('/') {
            return None;
        }
        Self::parse(tag)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Whether servers running `from` may be rolled to `to`; the reason if not.
///
/// # Errors
/// A human-readable refusal.
pub fn check(flavor: Flavor, from: Version, to: Version) -> Result<(), String> {
    let (Version(fa, fb, fp), Version(ta, tb, tp)) = (from, to);
    if (ta, tb) == (fa, fb) {
        if tp >= fp {
            return Ok(());
        }
        return match (flavor, fa, fb) {
            (Flavor::Mariadb, ..) | (Flavor::Mysql, 8, 4) | (Flavor::Mysql, 5, 7) => Ok(()),
            (Flavor::Mysql, 8, 0) if tp >= 35 => Ok(()),
            (Flavor::Mysql, 8, 0) => Err(format!(
                "{to} is older than {from}, which a server has run: MySQL 8.0 downgrades in place only between releases from 8.0.35 on"
            )),
            _ => Err(format!(
                "{to} is older than {from}, which a server has run: an innovation series cannot be downgraded in place"
            )),
        };
    }
    if (ta, tb) < (fa, fb) {
        return Err(format!(
            "{to} is older than the running {from}: a data directory cannot be downgraded across a release series ({fa}.{fb} to {ta}.{tb})"
        ));
    }
    let allowed = match flavor {
        Flavor::Mysql => match (fa, fb) {
            (5, 7) => (ta, tb) == (8, 0),
            (8, 4) => ta == 8 || ta == 9,
            (8, _) => ta == 8,
            _ => ta == fa || ta == fa + 1,
        },
        Flavor::Mariadb => ta == fa || ta == fa + 1,
    };
    if allowed {
        Ok(())
    } else {
        let via = match (flavor, fa, fb) {
            (Flavor::Mysql, 5, 7) => "8.0".to_owned(),
            (Flavor::Mysql, 8, _) => "8.4".to_owned(),
            _ => format!("{}.x", fa + 1),
        };
        Err(format!("{from} to {to} skips a release series: upgrade through {via} first"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn mysql_paths() {
        let ok = |a, b| check(Flavor::Mysql, v(a), v(b)).is_ok();
        assert!(ok("8.4.3", "8.4.5"));
        assert!(ok("8.4.5", "8.4.3"), "patch downgrades within the LTS series are allowed");
        assert!(ok("8.0.39", "8.0.35"));
        assert!(!ok("8.0.39", "8.0.34"), "8.0 downgrades only from 8.0.35 on");
        assert!(!ok("9.1.2", "9.1.0"), "no downgrade within an innovation series");
        assert!(ok("8.0.39", "8.4.3"));
        assert!(ok("5.7.44", "8.0.39"));
        assert!(ok("8.4.3", "9.1.0"));
        assert!(!ok("5.7.44", "8.4.3"), "skips 8.0");
        assert!(!ok("8.4.3", "8.0.39"), "minor downgrade");
        assert!(!ok("8.0.39", "5.7.44"), "major downgrade");
        assert!(!ok("8.0.39", "9.1.0"), "skips 8.4");
    }

    #[test]
    fn mariadb_paths() {
        let ok = |a, b| check(Flavor::Mariadb, v(a), v(b)).is_ok();
        assert!(ok("10.11.9", "11.4.4"));
        assert!(ok("11.4.4", "11.8.1"));
        assert!(!ok("11.4.4", "10.11.9"));
        assert!(!ok("10.6.1", "12.0.1"));
    }

    #[test]
    fn versions_from_images() {
        assert_eq!(Version::of_image("mysql:8.4.3"), Some(v("8.4.3")));
        assert_eq!(Version::of_image("registry:5000/mysql:8.0.39-oracle@sha256:ab"), Some(v("8.0.39")));
        assert_eq!(Version::of_image("registry:5000/mysql"), None);
        assert_eq!(Version::of_image("mysql:latest"), None);
    }
}
