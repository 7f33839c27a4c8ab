//! How `leaseUntil` is computed and compared: the blog's whole seconds with a
//! strict `<`, or exact. Under a time scale `s`, "whole seconds" become whole
//! units of `s` seconds, so the truncation keeps its shape.

use super::settings::Expiry;

#[derive(Clone, Copy, Debug)]
pub struct ExpiryRule {
    pub expiry: Expiry,
    /// One (scaled) second, in ns.
    pub resolution_ns: i64,
    pub lease_ns: i64,
}

impl ExpiryRule {
    /// Scaled Unix time in whole units (unix-seconds), or exact seconds.
    fn now_units(&self, wall_ns: i64) -> f64 {
        match self.expiry {
            Expiry::UnixSeconds => wall_ns.div_euclid(self.resolution_ns) as f64,
            Expiry::Exact => wall_ns as f64 / 1e9,
        }
    }

    /// `leaseUntil` for a lease written at `wall_ns`: Go's
    /// `time.Now().Add(lease).Unix()`, i.e. truncated.
    pub fn lease_until(&self, wall_ns: i64) -> f64 {
        self.now_units(wall_ns + self.lease_ns)
    }

    /// The blog's `content.LeaseUntil < time.Now().Unix()`.
    pub fn expired(&self, lease_until: f64, wall_ns: i64) -> bool {
        lease_until < self.now_units(wall_ns)
    }

    /// `leaseUntil` back to wall-clock ns (start of that unit), for logs.
    pub fn to_wall_ns(&self, lease_until: f64) -> i64 {
        match self.expiry {
            Expiry::UnixSeconds => (lease_until as i64).saturating_mul(self.resolution_ns),
            Expiry::Exact => (lease_until * 1e9) as i64,
        }
    }

    /// `leaseUntil` in Unix seconds, whatever the time scale: under a scale
    /// the lock file counts whole units of the scaled second.
    pub fn unix_seconds(&self, lease_until: f64) -> f64 {
        match self.expiry {
            Expiry::UnixSeconds => lease_until * self.resolution_ns as f64 / 1e9,
            Expiry::Exact => lease_until,
        }
    }

    /// A `leaseUntil` already in the past (for the lock-stale fault).
    pub fn stale(&self, wall_ns: i64) -> f64 {
        self.now_units(wall_ns - 2 * self.lease_ns - 2 * self.resolution_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn blog() -> ExpiryRule {
        ExpiryRule { expiry: Expiry::UnixSeconds, resolution_ns: S, lease_ns: 9 * S }
    }

    #[test]
    fn a_lease_is_still_valid_in_the_second_it_expires() {
        // Renewed at x.53 s: leaseUntil = floor(x.53 + 9) = x + 9.
        let r = blog();
        let renewed = 1_000 * S + 530_000_000;
        let until = r.lease_until(renewed);
        assert_eq!(until, 1_009.0);
        // The watcher's check exactly 9 s later is in the same second: valid.
        assert!(!r.expired(until, renewed + 9 * S));
        // One tick (3 s) later it is expired.
        assert!(r.expired(until, renewed + 12 * S));
        // The first instant it counts as expired is the next whole second.
        assert!(!r.expired(until, 1_010 * S - 1));
        assert!(r.expired(until, 1_010 * S));
    }

    #[test]
    fn exact_expiry_has_no_truncation() {
        let r = ExpiryRule { expiry: Expiry::Exact, ..blog() };
        let until = r.lease_until(1_000 * S + 530_000_000);
        assert!(!r.expired(until, 1_009 * S + 530_000_000));
        assert!(r.expired(until, 1_009 * S + 531_000_000));
    }

    #[test]
    fn scaled_seconds_truncate_the_same_way() {
        let r = ExpiryRule { expiry: Expiry::UnixSeconds, resolution_ns: S / 10, lease_ns: 9 * S / 10 };
        let t = 100 * S + 53_000_000;
        assert_eq!(r.lease_until(t), 1009.0);
        assert!(!r.expired(1009.0, t + 9 * S / 10));
        assert!(r.stale(t) < r.now_units(t));
    }
}
