//! Ending every process of the sandbox user in a container: killed from
//! inside, else by restarting the container, then counted from outside.

use anyhow::{Context, Result, bail};
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures_util::StreamExt;

use super::container::Container;
use super::users::{SANDBOX_UID, SANDBOX_USER};

impl Container {
    /// Kills every process of the sandbox user (the container's init runs
    /// as another user and stays) and waits until none is left, so nothing
    /// a script started outlives its call.
    async fn kill_all(&self) -> Result<()> {
        // kill(-1) skips the caller and init; then wait until no process of
        // the user is left but zombies (which hold nothing and are reaped).
        const KILL_ALL: &str = r#"me=$$; i=0
while :; do
  kill -KILL -1 2>/dev/null; left=0
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$me" ] && continue
    [ -O "$d" ] || continue
    state=
    { while read -r k v; do [ "$k" = State: ] && { state=$v; break; }; done < "$d/status"; } 2>/dev/null
    case "$state" in Z*|"") ;; *) left=1 ;; esac
  done
  [ "$left" = 0 ] && exit 0
  i=$((i+1)); [ "$i" -gt 500 ] && exit 1
  sleep 0.01
done"#;
        let kill = CreateExecOptions {
            cmd: Some(vec!["sh".to_string(), "-c".to_string(), KILL_ALL.to_string()]),
            user: Some(SANDBOX_USER.to_string()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(&self.id, kill)
            .await
            .context("creating the kill exec")?;
        if let StartExecResults::Attached { mut output, .. } = self
            .docker
            .start_exec(&exec.id, None)
            .await
            .context("starting the kill exec")?
        {
            while output.next().await.is_some() {}
        }
        let code = self.docker.inspect_exec(&exec.id).await?.exit_code;
        match code {
            Some(0) => {}
            Some(code) => bail!("processes of the sandbox user survived being killed (the kill exited with {code})"),
            None => bail!("processes of the sandbox user survived being killed (the kill never finished)"),
        }
        Ok(())
    }

    /// Ends every process of the sandbox user. The kill runs inside the
    /// container, as that user; a script can defeat it (kill the killer, or
    /// leave no pid free for it to start), so when it fails the container
    /// itself is restarted, which ends everything in it from outside.
    pub async fn end_processes(&self) -> Result<()> {
        let Err(error) = self.kill_all().await else {
            return Ok(());
        };
        tracing::warn!(error = %format!("{error:#}"), container = %self.id, "the kill inside the container failed; restarting it");
        let options = bollard::query_parameters::RestartContainerOptionsBuilder::default()
            .t(0)
            .build();
        self.docker
            .restart_container(&self.id, Some(options))
            .await
            .with_context(|| format!("restarting container {} to end a script's processes", self.id))?;
        let survivors = self.sandbox_processes().await?;
        if survivors > 0 {
            bail!(
                "{survivors} process(es) of the sandbox user survived a restart of container {}",
                self.id
            );
        }
        Ok(())
    }

    /// How many live processes of the sandbox user the container holds,
    /// as the engine sees them from outside.
    async fn sandbox_processes(&self) -> Result<usize> {
        let options = bollard::query_parameters::TopOptionsBuilder::default()
            .ps_args("-o pid,uid,stat")
            .build();
        let top = self
            .docker
            .top_processes(&self.id, Some(options))
            .await
            .with_context(|| format!("listing the processes of container {}", self.id))?;
        let titles = top.titles.unwrap_or_default();
        let column = |name: &str| titles.iter().position(|t| t == name);
        let (Some(uid), Some(stat)) = (column("UID"), column("STAT")) else {
            bail!("the engine lists processes without UID and STAT");
        };
        let live = top
            .processes
            .unwrap_or_default()
            .iter()
            .filter(|row| row.get(uid).is_some_and(|u| u.trim() == SANDBOX_UID.to_string()))
            .filter(|row| row.get(stat).is_some_and(|s| !s.starts_with('Z')))
            .count();
        Ok(live)
    }
}
