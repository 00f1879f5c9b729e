//! Terminal views shared by the commands.

use octant_contracts::DimensionProfile;
use octant_core::catalogue::Dimension;

/// One row per profile: a label, a band with its interval per dimension (`*` = capped by a
/// veto, `—` = N/A) and the veto states that are not clear.
pub fn profile_table<'a>(rows: impl IntoIterator<Item = (String, &'a DimensionProfile)>, header: &str) -> String {
    let mut s = header.to_string();
    for d in Dimension::ALL {
        s.push_str(&format!(" {:>8}", &d.as_str()[..d.as_str().len().min(8)]));
    }
    s.push_str("  vetoes\n");
    for (label, p) in rows {
        s.push_str(&label);
        for d in Dimension::ALL {
            let cell = p.dimensions.iter().find(|b| b.dimension == d.as_str()).map_or("?".to_string(), |b| match b.band {
                None => "—".into(),
                Some(band) => {
                    let (lo, hi) = (b.band_low.unwrap_or(band), b.band_high.unwrap_or(band));
                    let interval = if lo == hi { format!("{band}") } else { format!("{band}[{lo}-{hi}]") };
                    format!("{interval}{}", if b.capped_by.is_empty() { "" } else { "*" })
                }
            });
            s.push_str(&format!(" {cell:>8}"));
        }
        let vetoes: Vec<String> = p
            .vetoes
            .iter()
            .filter(|v| v.state != "clear")
            .map(|v| {
                format!(
                    "{}{}={}",
                    v.rule.trim_end_matches("_veto"),
                    v.benchmark.as_ref().map_or(String::new(), |b| format!("({b})")),
                    v.state
                )
            })
            .collect();
        s.push_str(&format!(
            "  {}{}\n",
            if p.unsuitable { "UNSUITABLE " } else { "" },
            if vetoes.is_empty() { "clear".into() } else { vetoes.join(" ") }
        ));
    }
    s.push_str("(band[interval] per dimension, * capped by a veto, — N/A)\n");
    s.push_str(&format!("(bands read {})\n", octant_core::band_legend()));
    s
}
