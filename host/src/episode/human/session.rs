//! A person's session: the prompt, each line typed run as one sandboxed
//! step (its output shown as it comes), the session's own `task` commands,
//! and the clock: a warning before the wall-clock budget runs out, and the
//! end when it has.

use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::Instant;

use super::console::Console;
use super::input::{self, TaskCommand, Typed};
use super::text;
use crate::capability::AgentState;
use crate::capability::exec::{self, CommandOutcome, GUEST_WORKSPACE};
use crate::capability::mlrb::agent::episode::Host as _;
use crate::episode::end::{EndReason, classify_trap};
use crate::sandbox::{Stopper, Termination};

/// How often a running command's output is looked for.
const SHOW_EVERY: Duration = Duration::from_millis(100);

/// Why a session stopped.
pub enum Finish {
    /// `task submit`.
    Submitted,
    /// The wall-clock budget ran out.
    TimeUp,
    /// `task pause`, or the terminal closed: it goes on later.
    Paused,
    /// The episode ended as an agent's would (the step budget kept being
    /// asked past, the records full, a host fault).
    Stopped(EndReason, String),
}

/// What happens next, or why the session stops.
type Flow<T> = Result<T, Finish>;

/// What woke the session while it waited.
enum Wake<T> {
    Done(T),
    TimeUp,
    Warn,
    Interrupt,
    /// Time to show more of a running command's output.
    Tick,
}

/// One person's session over an episode's state.
pub struct Session<'a> {
    state: &'a mut AgentState,
    console: &'a mut Console,
    cwd: String,
    clock: Clock,
    /// Ctrl-C (SIGINT from the terminal), each one kept until it is read.
    interrupts: Option<Signal>,
}

/// Resolves at the next Ctrl-C (never, where none can be listened for).
async fn interrupted(interrupts: &mut Option<Signal>) {
    match interrupts {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// The session's deadline, and when to warn of it.
struct Clock {
    deadline: Instant,
    /// When to warn that time is running out; `None` once warned.
    warn_at: Option<Instant>,
}

impl Clock {
    /// Warns once, when it is time to.
    fn warn_if_due(&mut self, console: &mut Console) {
        if self.warn_at.is_some_and(|at| Instant::now() >= at) {
            self.warn_at = None;
            let left = self.deadline.saturating_duration_since(Instant::now());
            console.say(&format!(
                "\nmlrb: {} of wall-clock time left: then the session ends and the workspace is scored as it is (task submit ends it now)",
                text::duration(left)
            ));
        }
    }
}

impl<'a> Session<'a> {
    /// A session over `state`, shown on `console`.
    pub fn new(state: &'a mut AgentState, console: &'a mut Console) -> Self {
        let deadline = Instant::from_std(state.recorder.deadline);
        let wall = state
            .recorder
            .deadline
            .saturating_duration_since(state.recorder.started);
        let lead = (wall / 5).min(Duration::from_secs(300));
        Self {
            state,
            console,
            cwd: GUEST_WORKSPACE.to_string(),
            clock: Clock {
                deadline,
                warn_at: Some(deadline.checked_sub(lead).unwrap_or(deadline)),
            },
            interrupts: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Reads and runs command lines until the person submits or pauses,
    /// the time is up or the episode ends.
    pub async fn run(&mut self) -> Finish {
        loop {
            match self.next().await {
                Ok(()) => {}
                Err(finish) => return finish,
            }
        }
    }

    async fn next(&mut self) -> Flow<()> {
        if Instant::now() >= self.clock.deadline {
            return Err(self.time_up());
        }
        let Some(typed) = self.read_command().await? else {
            self.console.say("");
            return Err(Finish::Paused);
        };
        match input::parse(&typed) {
            Typed::Empty => Ok(()),
            Typed::Exit => {
                self.console.say(text::EXIT_HINT);
                Ok(())
            }
            Typed::Task(command) => self.task(command).await,
            Typed::Cd(line) => self.cd(&line).await,
            Typed::Shell(line) => self.shell(&line).await.map(|_| ()),
        }
    }

    /// Waits for `future` (which must not touch the console), waking to
    /// warn of the time left, at the deadline and at Ctrl-C.
    async fn wait<T>(
        clock: &Clock,
        future: &mut (impl std::future::Future<Output = T> + Unpin),
        interrupts: &mut Option<Signal>,
    ) -> Wake<T> {
        let (deadline, warn_at) = (clock.deadline, clock.warn_at);
        tokio::select! {
            done = future => Wake::Done(done),
            _ = tokio::time::sleep_until(deadline) => Wake::TimeUp,
            _ = tokio::time::sleep_until(warn_at.unwrap_or(deadline)), if warn_at.is_some() => Wake::Warn,
            _ = interrupted(interrupts) => Wake::Interrupt,
        }
    }

    /// The next whole command line (more lines are asked for while a
    /// here-document is open or a line ends in `\`); `None` at Ctrl-D.
    async fn read_command(&mut self) -> Flow<Option<String>> {
        let prompt = self.prompt();
        self.console.show(&prompt);
        let mut typed = String::new();
        loop {
            let wake = {
                let mut line = Box::pin(self.console.read_line());
                Self::wait(&self.clock, &mut line, &mut self.interrupts).await
            };
            match wake {
                Wake::Done(None) => return Ok(None),
                Wake::Done(Some(line)) => {
                    if !typed.is_empty() {
                        typed.push('\n');
                    }
                    typed.push_str(&line);
                    if input::is_complete(&typed) {
                        return Ok(Some(typed));
                    }
                    self.console.show("> ");
                }
                Wake::TimeUp => return Err(self.time_up()),
                Wake::Warn => {
                    self.clock.warn_if_due(self.console);
                    self.console.show(if typed.is_empty() { &prompt } else { "> " });
                }
                Wake::Interrupt | Wake::Tick => {
                    self.console.say(text::INTERRUPT_HINT);
                    typed.clear();
                    self.console.show(&prompt);
                }
            }
        }
    }

    /// Runs `line` in the sandbox as one step, showing its output as it
    /// comes; Ctrl-C stops it.
    async fn shell(&mut self, line: &str) -> Flow<Option<CommandOutcome>> {
        let prefix = self.state.exec.runner.next_log_prefix();
        let mut shown = text::Tail::new(&prefix);
        let stop = Stopper::default();
        let result = {
            let mut view = exec::view(self.state);
            let mut run = Box::pin(view.command_line(line, &self.cwd, stop.clone()));
            loop {
                let mut tick = Box::pin(tokio::time::sleep(SHOW_EVERY));
                let wake = tokio::select! {
                    result = &mut run => Wake::Done(result),
                    _ = &mut tick => Wake::Tick,
                    _ = interrupted(&mut self.interrupts) => Wake::Interrupt,
                };
                match wake {
                    Wake::Done(result) => break result,
                    Wake::Interrupt => stop.stop("interrupted (Ctrl-C)"),
                    _ => {}
                }
                shown.more(self.console);
                self.clock.warn_if_due(self.console);
            }
        };
        shown.more(self.console);
        // What follows starts a line of its own.
        if !shown.at_line_start() {
            self.console.show("\n");
        }
        match result {
            Err(trap) => Err(stopped(&trap)),
            Ok(Err(refused)) => {
                let hint = match refused {
                    crate::capability::ToolError::BudgetExhausted(_) => " (`task submit` ends the session)",
                    _ => "",
                };
                self.console.say(&format!("mlrb: {refused}{hint}"));
                Ok(None)
            }
            Ok(Ok(outcome)) => {
                self.console.show(&text::ending(&outcome));
                Ok(Some(outcome))
            }
        }
    }

    /// `cd`: run in the sandbox; the folder it ends in is where later
    /// lines run.
    async fn cd(&mut self, line: &str) -> Flow<()> {
        if let Some(outcome) = self.shell(&format!("{line} && pwd")).await?
            && outcome.exit_code == Some(0)
            && outcome.termination == Termination::Exited
            && let Some(folder) = outcome.stdout.lines().last()
        {
            self.cwd = folder.to_string();
        }
        Ok(())
    }

    async fn task(&mut self, command: TaskCommand) -> Flow<()> {
        match command {
            TaskCommand::Submit => return Err(Finish::Submitted),
            TaskCommand::Pause => return Err(Finish::Paused),
            TaskCommand::Status => {
                let mut view = crate::capability::episode::view(self.state);
                view.current_usage().await.map_err(|trap| stopped(&trap))?;
                let usage = view.usage();
                let episode = &self.state.episode;
                let validations = (episode.validations().len(), episode.validation_allowance());
                let left = self.clock.deadline.saturating_duration_since(Instant::now());
                self.console.say(&text::status(&usage, left, validations));
            }
            TaskCommand::Validate => {
                self.console
                    .say("scoring a copy of the workspace as validate() does ...");
                let mut view = crate::capability::episode::view(self.state);
                let told = view.validate_recorded().await.map_err(|trap| stopped(&trap))?;
                match told {
                    Ok(report) => self.console.say(&report.message),
                    Err(refused) => self.console.say(&format!("mlrb: {refused}")),
                }
            }
            TaskCommand::Info => {
                let info = self.state.episode.task_info.clone();
                self.console.say(&text::task_info(&info));
            }
            TaskCommand::Help => self.console.say(text::HELP),
            TaskCommand::Unknown(word) => self.console.say(&format!(
                "mlrb: `task {word}` is not a command: task status, validate, submit, pause, info or help"
            )),
        }
        Ok(())
    }

    fn prompt(&self) -> String {
        let left = self.clock.deadline.saturating_duration_since(Instant::now());
        format!("[{} left] {}$ ", text::duration(left), self.cwd)
    }

    fn time_up(&mut self) -> Finish {
        self.console
            .say("\nmlrb: the wall-clock budget ran out: the session ends, and the workspace is scored as it is");
        Finish::TimeUp
    }
}

/// The end of the episode a host call raised.
fn stopped(trap: &wasmtime::Error) -> Finish {
    let (reason, detail) = classify_trap(trap, false);
    Finish::Stopped(reason, detail)
}
