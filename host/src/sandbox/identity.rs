//! The user a sandboxed script runs as, the same in every sandbox: its
//! uid and gid, the passwd and group entries that name them, and the
//! variables that say who and where it is.
//!
//! Libraries ask who they run as (`getpass.getuser()`, `getpwuid(3)`;
//! torch does when it imports `torch._dynamo`) and fail without an entry,
//! so each sandbox gets its own `/etc/passwd` and `/etc/group`, generated
//! here: never the host's, whose user names and homes are none of a
//! script's business.

/// The uid scripts run as: a plain user, never root.
pub const UID: u32 = 1000;
/// The gid scripts run as.
pub const GID: u32 = 1000;
/// The name of that user (and of its group).
pub const NAME: &str = "mlrb";
/// Its home: the sandbox's private, writable `/tmp`.
pub const HOME: &str = "/tmp";
/// Where a sandbox's generated files are bound.
pub const PASSWD_PATH: &str = "/etc/passwd";
/// Where a sandbox's generated group file is bound.
pub const GROUP_PATH: &str = "/etc/group";

/// `uid:gid` of the script user, as Docker and the launcher take it.
pub fn uid_gid() -> String {
    format!("{UID}:{GID}")
}

/// The sandbox's `/etc/passwd`: root (a container's init and launcher),
/// the script user, and nobody (the egress relay).
pub fn passwd() -> String {
    format!(
        "root:x:0:0:root:/root:/bin/sh\n\
         {NAME}:x:{UID}:{GID}:mlrb sandbox:{HOME}:/bin/sh\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
}

/// The sandbox's `/etc/group`, naming the groups of [`passwd`].
pub fn group() -> String {
    format!("root:x:0:\n{NAME}:x:{GID}:\nnogroup:x:65534:\n")
}

/// The variables that agree with the entries: who the script is and
/// where its home is.
pub fn environment() -> Vec<(String, String)> {
    [("USER", NAME), ("LOGNAME", NAME), ("HOME", HOME)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries parse as passwd(5) and group(5) lines and agree with
    /// the uid, gid, name and home the variables give.
    #[test]
    fn the_entries_and_the_variables_name_one_user() {
        let line = passwd()
            .lines()
            .find(|l| l.starts_with(&format!("{NAME}:")))
            .unwrap()
            .to_string();
        let fields: Vec<&str> = line.split(':').collect();
        assert_eq!(fields.len(), 7, "{line}");
        assert_eq!(
            (fields[2], fields[3], fields[5]),
            (&*UID.to_string(), &*GID.to_string(), HOME)
        );
        assert!(group().lines().any(|l| l == format!("{NAME}:x:{GID}:")));
        let env = environment();
        for (key, value) in [("USER", NAME), ("LOGNAME", NAME), ("HOME", HOME)] {
            assert!(env.contains(&(key.to_string(), value.to_string())), "{key}");
        }
        assert_eq!(uid_gid(), "1000:1000");
    }
}
