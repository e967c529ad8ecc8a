//! A table as text cells, which the terminal and report.html both show.

/// A table as text cells: the terminal tables and report.html show the same.
pub struct TextTable {
    /// The column headings.
    pub header: Vec<&'static str>,
    /// The rows, each a list of cells.
    pub rows: Vec<Vec<String>>,
}

impl TextTable {
    /// Only the columns at `keep`, in that order.
    pub fn columns(self, keep: &[usize]) -> Self {
        let pick = |cells: &[String]| keep.iter().filter_map(|i| cells.get(*i).cloned()).collect();
        Self {
            header: keep.iter().filter_map(|i| self.header.get(*i).copied()).collect(),
            rows: self.rows.iter().map(|r| pick(r)).collect(),
        }
    }
}

impl TextTable {
    /// Cells that say why the design cannot tell, shortened to that: the
    /// reason is said once, beside the table.
    pub fn shortened(mut self) -> Self {
        for cell in self.rows.iter_mut().flatten() {
            if cell.starts_with("cannot tell") {
                *cell = "none: cannot tell".into();
            }
        }
        self
    }
}
