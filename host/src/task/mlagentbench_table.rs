//! Where each upstream MLAgentBench folder stands with mlrb (`mlrb tasks
//! check --suite mlagentbench`, and the README's table): whether the smoke
//! profile runs it offline on stand-in data, what running it with its real
//! data needs, or why mlrb refuses it. Read from the overlay, the one place
//! these facts are kept.

use serde::Serialize;

use super::mlagentbench;

/// One upstream folder's standing.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The folder's name under MLAgentBench/benchmarks/.
    pub folder: String,
    /// Whether `mlrb tasks test FOLDER --smoke` runs it.
    pub smoke: bool,
    /// How the smoke profile runs it, or why it does not.
    pub smoke_detail: String,
    /// What its real data need; none where it is refused.
    pub real_data: Option<String>,
    /// Why mlrb does not score it, where it does not.
    pub refused: Option<String>,
}

/// Every upstream folder, by name (case aside).
pub fn rows() -> Vec<Row> {
    let (known, absent) = mlagentbench::upstream();
    let mut rows: Vec<Row> = known
        .into_iter()
        .map(|(folder, known)| {
            let smoke_detail = match (&known.smoke, &known.no_smoke) {
                (Some(smoke), _) => {
                    let starter = match &smoke.skeleton {
                        Some(_) => "its skeleton train.py reads the stand-in data, the stand-in submits",
                        None => "its train.py runs on the stand-in data",
                    };
                    format!(
                        "its prepare.py on stand-in data; {starter}; its eval.py scores and refuses {} invalid submissions",
                        smoke.invalid.len()
                    )
                }
                (None, Some(why)) => why.clone(),
                (None, None) => "no stand-in".into(),
            };
            Row {
                smoke: known.smoke.is_some(),
                smoke_detail,
                real_data: known.refused.is_none().then(|| known.real_data.clone()),
                refused: known.refused.clone(),
                folder,
            }
        })
        .collect();
    rows.extend(absent.into_iter().map(|(folder, absent)| Row {
        folder,
        smoke: false,
        smoke_detail: "nothing to run".into(),
        real_data: None,
        refused: Some(absent.why),
    }));
    rows.sort_by_key(|r| r.folder.to_lowercase());
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upstream_folder_has_a_row_and_the_readme_agrees() {
        let rows = rows();
        assert_eq!(rows.len(), 15, "MLAgentBench has fifteen benchmark folders");
        for row in &rows {
            assert!(row.real_data.is_some() != row.refused.is_some(), "{row:?}");
            assert!(
                row.real_data.as_ref().is_none_or(|r| !r.is_empty()),
                "{}: what its real data need",
                row.folder
            );
        }
        let refused: Vec<_> = rows
            .iter()
            .filter(|r| r.refused.is_some())
            .map(|r| r.folder.as_str())
            .collect();
        assert_eq!(
            refused,
            [
                "babylm",
                "bibtex-generation",
                "CLRS",
                "literature-review-tool",
                "llama-inference"
            ]
        );
        // The README's table says the same of each folder's smoke profile.
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
        for row in &rows {
            let line = readme
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", row.folder)))
                .unwrap_or_else(|| panic!("README.md: no table row for {}", row.folder));
            let said = line.split('|').nth(2).unwrap().trim();
            assert_eq!(said.starts_with("yes"), row.smoke, "README.md: {line}");
        }
    }
}
