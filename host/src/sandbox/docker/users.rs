//! The users a container's processes run as: scripts, the launcher, the
//! container's init and the egress relay. The script user's entries are
//! `identity`'s, bound over the image's `/etc/passwd` and `/etc/group`.

/// The uid:gid scripts run as: a plain user, never root (`identity`).
pub const SANDBOX_USER: &str = "1000:1000";
/// The same user's uid (and gid).
pub const SANDBOX_UID: u32 = crate::sandbox::identity::UID;
/// The container's init and main process run as root with only CAP_SETUID
/// and CAP_SETGID (the engine gives a root exec the container's
/// capabilities only when its user is root: the launcher needs them), never
/// as the sandbox user, so no script can signal, trace or read them.
pub const INIT_USER: &str = "0:0";
/// The user the egress relay drops to, neither root nor the sandbox user.
pub const RELAY_USER: &str = "65534";
/// The user an episode's launcher runs as: root with only the capabilities
/// to start scripts as [`SANDBOX_USER`], who can then neither signal, nor
/// trace, nor read it.
pub const LAUNCHER_USER: &str = INIT_USER;

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_user_is_identitys() {
        assert_eq!(super::SANDBOX_USER, crate::sandbox::identity::uid_gid());
    }
}
