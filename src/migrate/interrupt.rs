//! Stopping a move on purpose at a given point, as a crash or a Ctrl-C
//! there would: the hidden `--stop-after` (`BINDERY_MIGRATE_STOP_AFTER`),
//! with which e2e `migrate` interrupts the move after each step, and inside
//! the steps that change one object at a time, and shows that running it
//! again loses nothing. Pure.
//!
//! A point is a step (`1` to `4`, see [`super`]; `4` is reached once the
//! copied CRD is gone, before kube-bind's APIServiceBinding is deleted) or
//! a count of objects done inside step 3 (adopted) or 4 (released):
//! `3.50`. Each is taken the first time the move reaches it.

use anyhow::{Result, bail};
use std::fmt;
use std::str::FromStr;

/// Where to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub step: u8,
    /// Objects done inside the step; `None`: the whole step.
    pub objects: Option<usize>,
}

impl FromStr for Point {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (step, objects) = match text.split_once('.') {
            Some((step, objects)) => (step, Some(objects)),
            None => (text, None),
        };
        let step: u8 = step
            .parse()
            .ok()
            .filter(|s| (1..=4).contains(s))
            .ok_or_else(|| format!("{text:?}: the step is 1, 2, 3 or 4"))?;
        let objects = match objects {
            None => None,
            Some(_) if step < 3 => {
                return Err(format!("{text:?}: only steps 3 and 4 count objects"));
            }
            Some(n) => Some(
                n.parse()
                    .map_err(|_| format!("{text:?}: {n:?} is not a count of objects"))?,
            ),
        };
        Ok(Self { step, objects })
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.objects {
            None => write!(f, "step {}", self.step),
            Some(n) => write!(f, "{n} objects of step {}", self.step),
        }
    }
}

/// The point a move stops at, if any.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopAfter(pub Option<Point>);

impl StopAfter {
    /// Step `step` is done.
    pub fn step_done(&self, step: u8) -> Result<()> {
        self.reached(Point {
            step,
            objects: None,
        })
    }

    /// `done` objects of step `step` are done, in this run.
    pub fn objects_done(&self, step: u8, done: usize) -> Result<()> {
        self.reached(Point {
            step,
            objects: Some(done),
        })
    }

    fn reached(&self, here: Point) -> Result<()> {
        if self.0 == Some(here) {
            eprintln!("   stopping here, as asked: after {here}");
            bail!("stopped after {here}, as asked; run the move again to finish it");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_steps_or_counts_inside_steps_3_and_4() {
        assert_eq!(
            "2".parse(),
            Ok(Point {
                step: 2,
                objects: None
            })
        );
        assert_eq!(
            "3.50".parse(),
            Ok(Point {
                step: 3,
                objects: Some(50)
            })
        );
        for bad in ["0", "5", "x", "2.1", "3.", "3.x", ""] {
            assert!(bad.parse::<Point>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_move_stops_at_its_point_only() {
        let stop = StopAfter(Some("3.2".parse().unwrap()));
        assert!(stop.step_done(1).is_ok());
        assert!(stop.objects_done(3, 1).is_ok());
        assert!(stop.objects_done(4, 2).is_ok());
        let stopped = stop.objects_done(3, 2).unwrap_err().to_string();
        assert!(stopped.contains("after 2 objects of step 3"), "{stopped}");
        assert!(StopAfter::default().step_done(4).is_ok());
    }
}
