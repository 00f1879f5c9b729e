//! The eight trustworthiness dimensions of design §1 (their own module: the catalogue's rows
//! and the veto rules both name them).

use serde::{Deserialize, Serialize};

/// The eight trustworthiness dimensions, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    Capability,
    Robustness,
    Safety,
    Fairness,
    Transparency,
    Governance,
    Oversight,
    Efficiency,
}

impl Dimension {
    pub const ALL: [Dimension; 8] = [
        Dimension::Capability,
        Dimension::Robustness,
        Dimension::Safety,
        Dimension::Fairness,
        Dimension::Transparency,
        Dimension::Governance,
        Dimension::Oversight,
        Dimension::Efficiency,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Capability => "capability",
            Dimension::Robustness => "robustness",
            Dimension::Safety => "safety",
            Dimension::Fairness => "fairness",
            Dimension::Transparency => "transparency",
            Dimension::Governance => "governance",
            Dimension::Oversight => "oversight",
            Dimension::Efficiency => "efficiency",
        }
    }

    pub fn parse(s: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
