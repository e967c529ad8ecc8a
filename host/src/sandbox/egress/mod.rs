//! Where an episode's network grant (`crate::network`) is enforced for
//! scripts: the per-episode egress proxy (`proxy`), which resolves names
//! itself (so DNS is no side channel) and records every connection, and
//! the gateway that puts it on a Unix socket the sandboxes bind in; and the
//! roots an agent's HTTPS trusts (`trust`).

pub mod gateway;
pub mod proxy;
pub mod trust;

pub use crate::network::{AllowList, Connection, Network, NetworkUse, Rule, canonical, refusal};
