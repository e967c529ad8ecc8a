//! `mlrb bench`: every agent on every task over several seeds, run with a
//! bounded number of episodes at once, journalled so that a killed bench
//! resumes exactly, and summarised into `results.jsonl` and `summary.json`.

pub mod across;
pub mod compact;
pub mod compare;
pub mod epochs;
pub mod export;
pub mod headline;
pub mod html;
mod human_limits;
mod humans;
pub mod invalidate;
pub mod journal;
mod matrix;
mod opened;
pub mod placement;
mod plan;
pub mod plots;
pub mod profiles;
pub mod progress;
pub mod queue;
pub mod ranked;
pub mod result_line;
mod results;
mod run;
#[cfg(test)]
mod sample;
pub mod scan;
pub mod score_plot;
pub mod summary;
pub mod text_table;
pub mod verify;

pub use humans::check_plan_people;
pub use matrix::Matrix;
pub use plan::{AgentEntry, EpisodeSpec, Plan, Seeds, plan_episodes};
pub use result_line::smoke_of;
pub use results::{read_results, write_outputs};
pub use run::{Outcome, run};
