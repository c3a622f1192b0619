//! PASS/FAIL lines, one per check, and the tally.

use crate::errno::Errno;
use std::fmt::{Debug, Display};

/// Counts checks for the whole run; prefixes lines with the scenario.
#[derive(Default)]
pub struct Report {
    scenario: &'static str,
    pub passed: u32,
    pub failed: u32,
}

impl Report {
    /// Starts the lines of `scenario`.
    pub fn begin(&mut self, scenario: &'static str) {
        self.scenario = scenario;
        println!("=== {scenario}");
    }

    /// Records one check.
    pub fn check(&mut self, ok: bool, what: impl Display) -> bool {
        if ok {
            self.passed += 1;
            println!("PASS: {}: {what}", self.scenario);
        } else {
            self.failed += 1;
            println!("FAIL: {}: {what}", self.scenario);
        }
        ok
    }

    /// Records a failure with an explanation.
    pub fn fail(&mut self, what: impl Display) {
        self.check(false, what);
    }

    /// Prints a line that is not a check.
    pub fn info(&self, what: impl Display) {
        println!("INFO: {}: {what}", self.scenario);
    }

    /// `got` must equal `want`.
    pub fn eq<T: PartialEq + Debug>(&mut self, what: impl Display, got: T, want: T) -> bool {
        if got == want {
            self.check(true, what)
        } else {
            self.check(false, format!("{what}: got {got:?}, expected {want:?}"))
        }
    }

    /// The call must succeed.
    pub fn ok<T>(&mut self, what: impl Display, r: Result<T, Errno>) -> Option<T> {
        match r {
            Ok(v) => {
                self.check(true, what);
                Some(v)
            }
            Err(e) => {
                self.check(false, format!("{what}: failed with {e}"));
                None
            }
        }
    }

    /// The call must fail with `want`.
    pub fn errno<T>(&mut self, what: impl Display, r: Result<T, Errno>, want: Errno) -> bool {
        match r {
            Err(e) if e == want => self.check(true, format!("{what} ({want})")),
            Err(e) => self.check(false, format!("{what}: failed with {e}, expected {want}")),
            Ok(_) => self.check(false, format!("{what}: succeeded, expected {want}")),
        }
    }
}
