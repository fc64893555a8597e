//! The API server's own request counts, read from its `/metrics`: `apiserver_request_total` by
//! verb for the resources a sandbox involves, and the requests of ServiceAccounts from API
//! Priority and Fairness (`apiserver_flowcontrol_dispatched_requests_total` of the
//! `service-accounts` flow schema) — in this cluster the controller under test is the only
//! client that is a ServiceAccount, so that count is its own, exactly. Besides counts, two
//! times that tell the API server's side of a controller's latency from its own: how long the
//! API server took over the PATCHes of those resources (`apiserver_request_duration_seconds`;
//! only the controllers patch them, kwok's `pods/status` left out), and how long the
//! ServiceAccounts' requests waited in API Priority and Fairness's queues before they ran
//! (`apiserver_flowcontrol_request_wait_duration_seconds`).

use std::collections::BTreeMap;

use anyhow::Result;
use kube::Client;

/// Resources whose requests count as the sandbox's (core and both agent-sandbox groups).
const RESOURCES: &[&str] = &[
    "sandboxes",
    "sandboxclaims",
    "sandboxwarmpools",
    "sandboxtemplates",
    "pods",
    "services",
    "persistentvolumeclaims",
    "events",
    "networkpolicies",
];

/// A reading of the counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// `apiserver_request_total` by verb, over [`RESOURCES`], without the subresources only
    /// the scheduler and kwok write (`pods/binding`, `pods/status`).
    pub by_verb: BTreeMap<String, f64>,
    /// Requests of ServiceAccounts (the controller under test).
    pub service_accounts: f64,
    /// Time the API server took over PATCHes of [`RESOURCES`], by resource (`sandboxes`,
    /// `sandboxes/status`, ...).
    pub patch_by: BTreeMap<String, Timing>,
    /// Time ServiceAccounts' requests waited in API Priority and Fairness's queues.
    pub apf_wait: Timing,
}

/// A histogram's sum and count.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    /// Seconds, summed.
    pub seconds: f64,
    /// Observations.
    pub count: f64,
}

impl Timing {
    /// The mean in milliseconds, if anything was observed.
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.seconds * 1000.0 / self.count)
    }

    fn plus(self, other: Timing) -> Timing {
        Timing {
            seconds: self.seconds + other.seconds,
            count: self.count + other.count,
        }
    }

    fn since(&self, before: &Timing) -> Timing {
        Timing {
            seconds: (self.seconds - before.seconds).max(0.0),
            count: (self.count - before.count).max(0.0),
        }
    }
}

impl Counts {
    /// Reads the API server's metrics.
    pub async fn read(client: &Client) -> Result<Self> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = client.request_text(request).await?;
        Ok(parse(&text))
    }

    /// What was counted after `before` up to this reading.
    pub fn since(&self, before: &Counts) -> Counts {
        let by_verb = self
            .by_verb
            .iter()
            .map(|(verb, n)| {
                let earlier = before.by_verb.get(verb).copied().unwrap_or(0.0);
                (verb.clone(), (n - earlier).max(0.0))
            })
            .filter(|(_, n)| *n > 0.0)
            .collect();
        Counts {
            by_verb,
            service_accounts: (self.service_accounts - before.service_accounts).max(0.0),
            patch_by: self
                .patch_by
                .iter()
                .map(|(k, t)| {
                    (
                        k.clone(),
                        t.since(&before.patch_by.get(k).copied().unwrap_or_default()),
                    )
                })
                .filter(|(_, t)| t.count > 0.0)
                .collect(),
            apf_wait: self.apf_wait.since(&before.apf_wait),
        }
    }

    /// Time the API server took over all PATCHes of [`Counts::patch_by`].
    pub fn patch_total(&self) -> Timing {
        self.patch_by
            .values()
            .fold(Timing::default(), |a, t| a.plus(*t))
    }

    /// All requests of [`Counts::by_verb`].
    pub fn total(&self) -> f64 {
        self.by_verb.values().sum()
    }

    /// Takes away the requests the benchmark itself made (by verb).
    pub fn without(&self, own: &BTreeMap<String, f64>) -> Counts {
        let mut out = self.clone();
        for (verb, n) in own {
            if let Some(v) = out.by_verb.get_mut(verb) {
                *v = (*v - n).max(0.0);
            }
        }
        out.by_verb.retain(|_, n| *n > 0.0);
        out
    }
}

/// The labels of one sample line, and its value.
fn sample(line: &str) -> Option<(BTreeMap<&str, &str>, f64)> {
    let open = line.find('{')?;
    let close = line.rfind('}')?;
    let value = line[close + 1..].trim().parse().ok()?;
    let mut labels = BTreeMap::new();
    for pair in line[open + 1..close].split("\",") {
        let (key, value) = pair.split_once("=\"")?;
        labels.insert(key.trim(), value.trim_end_matches('"'));
    }
    Some((labels, value))
}

/// Whether a sample with these labels is a request to a sandbox's resources, leaving out
/// the subresources only the scheduler and kwok write.
fn sandbox_resource(labels: &BTreeMap<&str, &str>) -> bool {
    let resource = labels.get("resource").copied().unwrap_or_default();
    let subresource = labels.get("subresource").copied().unwrap_or_default();
    RESOURCES.contains(&resource)
        && !(resource == "pods" && matches!(subresource, "binding" | "status"))
}

fn parse(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines() {
        if let Some(is_sum) = histogram_part(line, "apiserver_request_duration_seconds") {
            if let Some((labels, value)) = sample(line)
                && labels.get("verb") == Some(&"PATCH")
                && sandbox_resource(&labels)
            {
                let resource = labels.get("resource").copied().unwrap_or_default();
                let key = match labels.get("subresource").copied().unwrap_or_default() {
                    "" => resource.to_owned(),
                    sub => format!("{resource}/{sub}"),
                };
                add(counts.patch_by.entry(key).or_default(), is_sum, value);
            }
        } else if let Some(is_sum) =
            histogram_part(line, "apiserver_flowcontrol_request_wait_duration_seconds")
        {
            if let Some((labels, value)) = sample(line)
                && labels.get("flow_schema") == Some(&"service-accounts")
            {
                add(&mut counts.apf_wait, is_sum, value);
            }
        } else if line.starts_with("apiserver_request_total{") {
            let Some((labels, value)) = sample(line) else {
                continue;
            };
            if !sandbox_resource(&labels) {
                continue;
            }
            let verb = labels.get("verb").copied().unwrap_or_default().to_owned();
            *counts.by_verb.entry(verb).or_default() += value;
        } else if line.starts_with("apiserver_flowcontrol_dispatched_requests_total{")
            && let Some((labels, value)) = sample(line)
            && labels.get("flow_schema") == Some(&"service-accounts")
        {
            counts.service_accounts += value;
        }
    }
    counts
}

/// Whether `line` is the sum (`true`) or the count (`false`) of histogram `name`; `None` for
/// any other line.
fn histogram_part(line: &str, name: &str) -> Option<bool> {
    let rest = line.strip_prefix(name)?;
    if rest.starts_with("_sum{") {
        Some(true)
    } else if rest.starts_with("_count{") {
        Some(false)
    } else {
        None
    }
}

fn add(timing: &mut Timing, is_sum: bool, value: f64) {
    if is_sum {
        timing.seconds += value;
    } else {
        timing.count += value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sandbox_requests_by_verb_and_service_account_requests() {
        let text = "\
# HELP apiserver_request_total x
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"agents.x-k8s.io\",resource=\"sandboxes\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1beta1\"} 10
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"agents.x-k8s.io\",resource=\"sandboxes\",scope=\"resource\",subresource=\"status\",verb=\"PUT\",version=\"v1beta1\"} 7
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"binding\",verb=\"POST\",version=\"v1\"} 10
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 10
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 10
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 25
apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"exempt\",priority_level=\"exempt\"} 900
apiserver_request_duration_seconds_sum{component=\"apiserver\",dry_run=\"\",group=\"extensions.agents.x-k8s.io\",resource=\"sandboxclaims\",scope=\"resource\",subresource=\"\",verb=\"PATCH\",version=\"v1beta1\"} 0.5
apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"extensions.agents.x-k8s.io\",resource=\"sandboxclaims\",scope=\"resource\",subresource=\"\",verb=\"PATCH\",version=\"v1beta1\"} 40
apiserver_request_duration_seconds_sum{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 9
apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 10
apiserver_request_duration_seconds_sum{component=\"apiserver\",dry_run=\"\",group=\"agents.x-k8s.io\",resource=\"sandboxes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1beta1\"} 3
apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"agents.x-k8s.io\",resource=\"sandboxes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1beta1\"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 0.25
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 25
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",flow_schema=\"exempt\",priority_level=\"exempt\"} 7
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"exempt\",priority_level=\"exempt\"} 900
";
        let counts = parse(text);
        assert_eq!(
            counts.by_verb,
            BTreeMap::from([("POST".to_owned(), 20.0), ("PUT".to_owned(), 7.0)])
        );
        assert_eq!(counts.service_accounts, 25.0);
        // Only the controllers' PATCHes (not kwok's pods/status, not GETs), and only the
        // ServiceAccounts' waits.
        assert_eq!(counts.patch_total().mean_ms(), Some(12.5));
        assert_eq!(
            counts.patch_by.keys().collect::<Vec<_>>(),
            vec!["sandboxclaims"]
        );
        assert_eq!(counts.apf_wait.mean_ms(), Some(10.0));
        assert_eq!(Timing::default().mean_ms(), None);
        let later = Counts {
            by_verb: BTreeMap::from([("POST".to_owned(), 50.0), ("PUT".to_owned(), 7.0)]),
            service_accounts: 40.0,
            apf_wait: Timing {
                seconds: 0.25,
                count: 25.0,
            },
            patch_by: BTreeMap::from([(
                "sandboxclaims".to_owned(),
                Timing {
                    seconds: 1.5,
                    count: 50.0,
                },
            )]),
        };
        let delta = later.since(&counts);
        assert_eq!(delta.by_verb, BTreeMap::from([("POST".to_owned(), 30.0)]));
        assert_eq!(delta.service_accounts, 15.0);
        assert_eq!(delta.patch_total().mean_ms(), Some(100.0));
        assert_eq!(delta.patch_by["sandboxclaims"].mean_ms(), Some(100.0));
        assert_eq!(delta.apf_wait.mean_ms(), None);
        let own = BTreeMap::from([("POST".to_owned(), 10.0)]);
        assert_eq!(delta.without(&own).total(), 20.0);
    }
}
