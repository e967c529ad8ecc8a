//! A table as text cells, which the terminal and report.html both show.

/// A table as text cells: the terminal tables and report.html show the same.
pub struct TextTable {
    /// The column headings.
    pub header: Vec<&'static str>,
    /// The rows, each a list of cells.
    pub rows: Vec<Vec<String>>,
}
