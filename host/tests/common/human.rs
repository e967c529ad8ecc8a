//! What a person's session on digits types, shared by the tests that need
//! one recorded.

use super::pty::Pty;

/// The prompt shows the time left and the folder, ending `$ `.
pub const PROMPT: &str = "/workspace$ ";

/// At a prompt: the deeper tree's edit, trained, validated and submitted;
/// the session has ended, scored.
pub fn deeper_tree_and_submit(pty: &mut Pty) {
    pty.type_line("sed -i 's/max_depth=8/max_depth=12/' train.py && python3 train.py");
    pty.expect("wrote submission.csv with 450 rows");
    pty.expect(PROMPT);
    pty.type_line("task validate");
    pty.expect(PROMPT);
    pty.type_line("task submit");
    pty.expect("scoring the final workspace");
    assert!(pty.wait().success(), "{}", pty.screen());
}
