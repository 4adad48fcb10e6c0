//! `leasehold status`: who holds the lease now, its fencing token and the time left, read
//! straight from Redis.

use std::time::Duration;

use serde::Serialize;

use super::lease::{connect, resolve_lease};
use crate::cli::{CliError, LeaseSource, OutputFormat, StatusSettings};
use crate::k8s::KubernetesMode;
use crate::lease::{CooldownState, LeaseName, Observation, OwnerId};

/// The JSON of `leasehold status --output json`.
#[derive(Debug, Serialize)]
pub struct StatusView {
    /// The lease name.
    pub lease: String,
    /// Its Redis key.
    pub lease_key: String,
    /// The holder's identity, if any.
    pub holder: Option<String>,
    /// The holder's owner id, if any.
    pub owner: Option<String>,
    /// The last fencing token handed out.
    pub token: Option<u64>,
    /// Milliseconds before the lease expires unless renewed (absent without a TTL).
    pub expires_in_ms: Option<u64>,
    /// `idle`, `running` or `pending` (the next acquire starts one).
    pub cooldown: &'static str,
    /// Milliseconds left in a running cooldown.
    pub cooldown_ms: Option<u64>,
}

impl StatusView {
    /// The view of an observation.
    pub fn of(lease: &LeaseName, lease_key: &str, seen: &Observation) -> Self {
        let (cooldown, cooldown_ms) = match seen.cooldown {
            CooldownState::Idle => ("idle", None),
            CooldownState::Running(left) => ("running", Some(left.as_millis() as u64)),
            CooldownState::Pending => ("pending", None),
        };
        Self {
            lease: lease.to_string(),
            lease_key: lease_key.to_owned(),
            holder: seen.holder.as_ref().map(|h| h.identity().to_owned()),
            owner: seen.holder.as_ref().map(|h| h.owner.clone()),
            token: seen.token.map(|t| t.0),
            expires_in_ms: seen
                .holder
                .as_ref()
                .and_then(|h| h.remaining)
                .map(|d| d.as_millis() as u64),
            cooldown,
            cooldown_ms,
        }
    }

    /// Aligned text for people.
    pub fn text(&self) -> String {
        let dash = || "-".to_owned();
        let rows = [
            ("lease", format!("{} ({})", self.lease, self.lease_key)),
            (
                "holder",
                match (&self.holder, &self.owner) {
                    (Some(h), Some(o)) => format!("{h} (owner id {o})"),
                    _ => "none".to_owned(),
                },
            ),
            ("token", self.token.map_or_else(dash, |t| t.to_string())),
            (
                "expires in",
                self.expires_in_ms.map_or_else(dash, |ms| {
                    humantime::format_duration(Duration::from_millis(ms)).to_string()
                }),
            ),
            (
                "cooldown",
                match self.cooldown_ms {
                    Some(ms) => format!(
                        "running, {} left",
                        humantime::format_duration(Duration::from_millis(ms))
                    ),
                    None => self.cooldown.to_owned(),
                },
            ),
        ];
        rows.iter().map(|(k, v)| format!("{k:<11} {v}\n")).collect()
    }
}

/// Names the lease, reads it and prints it; returns the exit code.
pub async fn status(settings: StatusSettings) -> Result<i32, CliError> {
    let name = match &settings.lease {
        LeaseSource::Named(name) => name.clone(),
        source => {
            let client = connect(KubernetesMode::Auto).await?;
            resolve_lease(source, client.as_ref(), "", None).await?.0
        }
    };
    Ok(show(&settings, name).await?)
}

async fn show(settings: &StatusSettings, lease_name: LeaseName) -> anyhow::Result<i32> {
    let owner = OwnerId::generate("leasehold-status")?;
    let lease = settings.redis.lease(lease_name.clone(), owner)?;
    let seen = lease.observe(Duration::from_secs(5)).await?;
    let view = StatusView::of(&lease_name, &lease.keys().lease, &seen);
    match settings.output {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&view)?),
        OutputFormat::Text => print!("{}", view.text()),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{FencingToken, Holder};

    #[test]
    fn text_and_json_show_the_holder() {
        let name = LeaseName::new("shop/web").unwrap();
        let seen = Observation {
            holder: Some(Holder {
                owner: "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e".into(),
                remaining: Some(Duration::from_millis(13_200)),
                token: Some(FencingToken(42)),
                vanished: false,
            }),
            token: Some(FencingToken(42)),
            cooldown: CooldownState::Idle,
        };
        let view = StatusView::of(&name, "leasehold:{shop/web}", &seen);
        let text = view.text();
        assert!(
            text.contains("holder      web-a (owner id web-a-0b7c2b5e"),
            "{text}"
        );
        assert!(text.contains("token       42"), "{text}");
        assert!(text.contains("expires in  13s 200ms"), "{text}");
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["holder"], "web-a");
        assert_eq!(json["expires_in_ms"], 13_200);
        assert_eq!(json["cooldown"], "idle");
    }
}
