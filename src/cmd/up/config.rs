//! The `rouse up` config file: `[api]` and `[runtime]` beside every section of the proxy's
//! config (docs/proxy-config.md), in one TOML file. Every key has a default, so no file at all
//! is a valid configuration.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rouse_controller::api::ApiConfig;
use rouse_controller::platform::local::{
    DEFAULT_PAGES_TO_SCAN, DEFAULT_SLEEP_MILLISECS, GvisorConfig, KsmConfig,
};
use serde::Deserialize;

/// The top-level sections `rouse up` owns; everything else belongs to the proxy.
const OWN_SECTIONS: [&str; 2] = ["api", "runtime"];

/// Everything `rouse up` can be told in its config file.
#[derive(Debug, Clone, Default)]
pub struct UpConfig {
    /// `[api]`: the REST API.
    pub api: ApiSection,
    /// `[runtime]`: the local runtimes.
    pub runtime: RuntimeSection,
    /// The proxy's sections; its directory is always the embedded store.
    pub proxy: rouse_proxy::Config,
}

/// `[api]`: the REST API.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSection {
    /// Address the REST API listens on. Default `127.0.0.1:7070`.
    pub listen: SocketAddr,
    /// Serve HTTPS with a CA made in `{data}/tls/`. Default true; false serves plain HTTP
    /// (Kubernetes clients then send no token: use it with `--no-auth` or for tests).
    pub tls: bool,
    /// More names (DNS or IP) for the serving certificate besides 127.0.0.1, ::1 and
    /// localhost. Default none.
    pub names: Vec<String>,
}

impl Default for ApiSection {
    fn default() -> Self {
        Self {
            listen: ApiConfig::DEFAULT_LISTEN,
            tls: true,
            names: Vec::new(),
        }
    }
}

/// `[runtime]`: the local runtimes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeSection {
    /// The `runsc` binary for `runtimeClassName: gvisor`: a path, or a name looked up on
    /// `PATH`. Default `runsc`.
    pub runsc: PathBuf,
    /// `[runtime.gvisor]`: how the gvisor runtime runs sandboxes (`platform = "systrap"` or
    /// `"ptrace"`, `background_restore`).
    pub gvisor: GvisorConfig,
    /// `[runtime.ksm]`: kernel same-page merging for `memorySharing: Merge` sandboxes.
    pub ksm: KsmSection,
    /// Wake-on-connect starts a suspended sandbox on the local runtime directly and writes
    /// the store behind it (docs/standalone.md, "Direct wake"). Default true; false wakes
    /// through the store only. Read at start.
    pub direct_wake: bool,
    /// Each workload runs in a cgroup of its own where the host allows it, so every stop kills
    /// all it started (docs/standalone-runtimes.md, "Stopping"). Default true; false keeps to
    /// process groups and environment marks. Read at start.
    pub cgroups: bool,
}

impl Default for RuntimeSection {
    fn default() -> Self {
        Self {
            runsc: PathBuf::from("runsc"),
            gvisor: GvisorConfig::default(),
            ksm: KsmSection::default(),
            direct_wake: true,
            cgroups: true,
        }
    }
}

/// `[runtime.ksm]`: how `rouse up` drives KSM for sandboxes with `memorySharing: Merge`
/// (docs/memory-sharing.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KsmSection {
    /// Turn KSM on (`/sys/kernel/mm/ksm/run = 1`) with the rate below when the first Merge
    /// sandbox starts. Default true; false leaves KSM to the operator.
    pub manage: bool,
    /// Pages `ksmd` scans per wake-up. Default 1000.
    pub pages_to_scan: u32,
    /// Milliseconds `ksmd` sleeps between wake-ups. Default 20.
    pub sleep_millisecs: u32,
}

impl Default for KsmSection {
    fn default() -> Self {
        Self {
            manage: true,
            pages_to_scan: DEFAULT_PAGES_TO_SCAN,
            sleep_millisecs: DEFAULT_SLEEP_MILLISECS,
        }
    }
}

impl KsmSection {
    /// The local platform's KSM settings.
    pub fn to_config(&self) -> KsmConfig {
        KsmConfig {
            manage: self.manage,
            pages_to_scan: self.pages_to_scan,
            sleep_millisecs: self.sleep_millisecs,
            ..KsmConfig::default()
        }
    }
}

/// The sections `rouse up` owns, with the proxy's ignored.
#[derive(Debug, Default, Deserialize)]
struct OwnSections {
    #[serde(default)]
    api: ApiSection,
    #[serde(default)]
    runtime: RuntimeSection,
}

impl UpConfig {
    /// Parses a config document; errors name the key and the line.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let mut proxy = rouse_proxy::Config::from_shared_toml(text, &OWN_SECTIONS)?;
        super::check_standalone(&proxy)?;
        let own: OwnSections = toml::from_str(text)
            .map_err(|err| anyhow::anyhow!("invalid config: {}", err.to_string().trim_end()))?;
        if !sets_upstream_headers(text) {
            // Standalone default: the upstream SDK routes by X-Sandbox-* headers, and on a
            // loopback proxy they reach nothing a hostname could not (docs/proxy-config.md).
            proxy.routing.upstream_headers = true;
        }
        Ok(Self {
            api: own.api,
            runtime: own.runtime,
            proxy,
        })
    }

    /// Reads and parses a config file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("config file {}", path.display()))
    }
}

/// Whether the document sets `routing.upstream_headers` itself (the document already parsed,
/// so a parse failure here cannot happen and means "not set").
fn sets_upstream_headers(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|doc| {
        doc.get("routing")
            .and_then(toml::Value::as_table)
            .is_some_and(|routing| routing.contains_key("upstream_headers"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_file_means_defaults() {
        let config = UpConfig::from_toml("").expect("empty config");
        assert_eq!(config.api.listen, ApiConfig::DEFAULT_LISTEN);
        assert!(config.api.tls);
        assert_eq!(config.runtime.runsc, PathBuf::from("runsc"));
        assert!(config.runtime.ksm.manage);
        assert!(config.runtime.direct_wake, "direct wake is on by default");
        let config = UpConfig::from_toml("[runtime]\ndirect_wake = false\n").expect("valid");
        assert!(!config.runtime.direct_wake);
        assert!(config.runtime.cgroups, "cgroups are on by default");
        let config = UpConfig::from_toml("[runtime]\ncgroups = false\n").expect("valid");
        assert!(!config.runtime.cgroups);
        assert_eq!(config.runtime.ksm.pages_to_scan, DEFAULT_PAGES_TO_SCAN);
        assert_eq!(config.runtime.ksm.sleep_millisecs, DEFAULT_SLEEP_MILLISECS);
        assert_eq!(
            config.proxy.http.listen,
            Some("127.0.0.1:8080".parse().expect("address"))
        );
        assert_eq!(config.proxy.routing.domains, vec!["sandbox.localhost"]);
        assert!(
            config.proxy.routing.upstream_headers,
            "on by default in standalone mode"
        );
    }

    #[test]
    fn upstream_headers_can_be_turned_off() {
        let config = UpConfig::from_toml("[routing]\nupstream_headers = false\n").expect("valid");
        assert!(!config.proxy.routing.upstream_headers);
        let config = UpConfig::from_toml("[routing]\ndefault_namespace = \"x\"\n").expect("valid");
        assert!(config.proxy.routing.upstream_headers);
    }

    #[test]
    fn own_and_proxy_sections_share_the_file() {
        let text = "[api]\nlisten = \"127.0.0.1:0\"\n[runtime]\nrunsc = \"/opt/runsc\"\n\
                    [http]\nlisten = \"127.0.0.1:0\"\n[wake]\ndeadline = \"5s\"\n";
        let config = UpConfig::from_toml(text).expect("valid config");
        assert_eq!(config.api.listen.port(), 0);
        assert_eq!(config.runtime.runsc, PathBuf::from("/opt/runsc"));
        assert_eq!(
            config.proxy.wake.deadline,
            std::time::Duration::from_secs(5)
        );
    }

    #[test]
    fn the_gvisor_section_has_defaults_and_names_a_bad_platform() {
        use rouse_controller::platform::local::GvisorPlatform;
        let config = UpConfig::from_toml("").expect("defaults");
        assert_eq!(config.runtime.gvisor.platform, GvisorPlatform::Systrap);
        assert!(config.runtime.gvisor.background_restore);
        let config =
            UpConfig::from_toml("[runtime.gvisor]\nplatform = \"ptrace\"\n").expect("valid");
        assert_eq!(config.runtime.gvisor.platform, GvisorPlatform::Ptrace);
        let err = UpConfig::from_toml("[runtime.gvisor]\nplatform = \"kvm2\"\n").expect_err("bad");
        assert!(format!("{err:#}").contains("platform"), "{err:#}");
    }

    #[test]
    fn bad_keys_are_named() {
        let err = UpConfig::from_toml("[api]\nlisten = \"nowhere\"\n").expect_err("bad address");
        assert!(format!("{err:#}").contains("listen"), "{err:#}");
        let err = UpConfig::from_toml("[api]\nlisen = \"127.0.0.1:1\"\n").expect_err("typo");
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
        let err = UpConfig::from_toml("\n[wake]\ndeadline = \"soon\"\n").expect_err("bad duration");
        assert!(
            format!("{err:#}").contains("line 3: wake.deadline"),
            "{err:#}"
        );
        let err = UpConfig::from_toml("[directory]\nkind = \"static\"\n").expect_err("static");
        assert!(format!("{err:#}").contains("[directory]"), "{err:#}");
    }

    #[test]
    fn the_ksm_rate_is_configurable_and_typos_are_rejected() {
        let text = "[runtime.ksm]\npages_to_scan = 5000\nsleep_millisecs = 10\nmanage = false\n";
        let config = UpConfig::from_toml(text).expect("valid config");
        let ksm = config.runtime.ksm.to_config();
        assert_eq!(
            (ksm.pages_to_scan, ksm.sleep_millisecs, ksm.manage),
            (5000, 10, false)
        );
        let error = UpConfig::from_toml("[runtime.ksm]\npages = 1\n").expect_err("unknown key");
        assert!(format!("{error:#}").contains("pages"), "{error:#}");
    }
}
