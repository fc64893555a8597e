//! The kinds the API serves, their URL plurals and the aliases the CLI accepts, in one table.

use rouse_shared::api::{EXTENSIONS_GROUP, GROUP, VERSION};

/// One of the five sandbox kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `Sandbox` (`agents.x-k8s.io`).
    Sandbox,
    /// `SandboxTemplate` (`extensions.agents.x-k8s.io`).
    SandboxTemplate,
    /// `SandboxWarmPool` (`extensions.agents.x-k8s.io`).
    SandboxWarmPool,
    /// `SandboxClaim` (`extensions.agents.x-k8s.io`).
    SandboxClaim,
    /// `SandboxSnapshot` (`agents.x-k8s.io`).
    SandboxSnapshot,
}

impl Kind {
    /// Every kind, in the order the API documents them.
    pub const ALL: [Kind; 5] = [
        Kind::Sandbox,
        Kind::SandboxTemplate,
        Kind::SandboxWarmPool,
        Kind::SandboxClaim,
        Kind::SandboxSnapshot,
    ];

    /// The kind named by a plural, singular, short name or kind, case-insensitively
    /// (`sandboxes`, `sandbox`, `sbx`, `Sandbox`, `swp`, `sbxsnap`, ...).
    pub fn parse(name: &str) -> Option<Kind> {
        let lower = name.to_ascii_lowercase();
        // `sandboxes.agents.x-k8s.io` names the resource with its group, as kubectl allows.
        let (base, group) = match lower.split_once('.') {
            Some((base, group)) => (base, Some(group)),
            None => (lower.as_str(), None),
        };
        let kind = Kind::ALL
            .into_iter()
            .find(|k| k.aliases().contains(&base) || k.plural() == base)?;
        match group {
            Some(g) if g != kind.group() => None,
            _ => Some(kind),
        }
    }

    /// The kind named by a URL plural (`sandboxes`), exactly.
    pub fn from_plural(plural: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.plural() == plural)
    }

    /// The `kind` field value.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Sandbox => "Sandbox",
            Kind::SandboxTemplate => "SandboxTemplate",
            Kind::SandboxWarmPool => "SandboxWarmPool",
            Kind::SandboxClaim => "SandboxClaim",
            Kind::SandboxSnapshot => "SandboxSnapshot",
        }
    }

    /// The kind named by a `kind` field value, exactly.
    pub fn from_kind(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// The URL plural.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Sandbox => "sandboxes",
            Kind::SandboxTemplate => "sandboxtemplates",
            Kind::SandboxWarmPool => "sandboxwarmpools",
            Kind::SandboxClaim => "sandboxclaims",
            Kind::SandboxSnapshot => "sandboxsnapshots",
        }
    }

    /// The lowercase singular (`sandbox`), as kubectl prints `sandbox.agents.x-k8s.io/name`.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Sandbox => "sandbox",
            Kind::SandboxTemplate => "sandboxtemplate",
            Kind::SandboxWarmPool => "sandboxwarmpool",
            Kind::SandboxClaim => "sandboxclaim",
            Kind::SandboxSnapshot => "sandboxsnapshot",
        }
    }

    /// Singular, kind and short names accepted besides the plural.
    fn aliases(self) -> &'static [&'static str] {
        match self {
            Kind::Sandbox => &["sandbox", "sbx"],
            Kind::SandboxTemplate => &[
                "sandboxtemplate",
                "sbxtemplate",
                "sbxt",
                "template",
                "templates",
            ],
            Kind::SandboxWarmPool => &[
                "sandboxwarmpool",
                "swp",
                "warmpool",
                "warmpools",
                "pool",
                "pools",
            ],
            Kind::SandboxClaim => &["sandboxclaim", "sbxclaim", "claim", "claims"],
            Kind::SandboxSnapshot => &["sandboxsnapshot", "sbxsnap", "snapshot", "snapshots"],
        }
    }

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            Kind::Sandbox | Kind::SandboxSnapshot => GROUP,
            _ => EXTENSIONS_GROUP,
        }
    }

    /// `group/version`, the `apiVersion` field value.
    pub fn api_version(self) -> String {
        format!("{}/{VERSION}", self.group())
    }

    /// `plural.group`, how Kubernetes names the resource in messages
    /// (`sandboxes.agents.x-k8s.io`).
    pub fn resource(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// `singular.group`, how kubectl names an object's type in its output
    /// (`sandbox.agents.x-k8s.io`).
    pub fn qualified_singular(self) -> String {
        format!("{}.{}", self.singular(), self.group())
    }

    /// A fixed metric label.
    pub fn metric_label(self) -> &'static str {
        self.plural()
    }
}

/// Runs a generic function for the concrete type of a [`Kind`]: `dispatch!(kind, f, args..)`
/// calls `f::<Sandbox>(args..)` and so on.
macro_rules! dispatch {
    ($kind:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $kind {
            $crate::api::kinds::Kind::Sandbox => $f::<::rouse_shared::api::Sandbox, _>($($arg),*).await,
            $crate::api::kinds::Kind::SandboxTemplate => {
                $f::<::rouse_shared::api::SandboxTemplate, _>($($arg),*).await
            }
            $crate::api::kinds::Kind::SandboxWarmPool => {
                $f::<::rouse_shared::api::SandboxWarmPool, _>($($arg),*).await
            }
            $crate::api::kinds::Kind::SandboxClaim => {
                $f::<::rouse_shared::api::SandboxClaim, _>($($arg),*).await
            }
            $crate::api::kinds::Kind::SandboxSnapshot => {
                $f::<::rouse_shared::api::SandboxSnapshot, _>($($arg),*).await
            }
        }
    };
}
pub(crate) use dispatch;

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn aliases_resolve() {
        let cases = [
            ("sandboxes", Some(Kind::Sandbox)),
            ("Sandbox", Some(Kind::Sandbox)),
            ("sbx", Some(Kind::Sandbox)),
            ("sandboxes.agents.x-k8s.io", Some(Kind::Sandbox)),
            ("sandboxes.extensions.agents.x-k8s.io", None),
            ("swp", Some(Kind::SandboxWarmPool)),
            ("SandboxWarmPools", Some(Kind::SandboxWarmPool)),
            ("sbxsnap", Some(Kind::SandboxSnapshot)),
            ("sandboxclaim", Some(Kind::SandboxClaim)),
            ("sandboxtemplates", Some(Kind::SandboxTemplate)),
            ("pods", None),
        ];
        for (name, want) in cases {
            assert_eq!(Kind::parse(name), want, "{name}");
        }
        for kind in Kind::ALL {
            assert_eq!(Kind::from_plural(kind.plural()), Some(kind));
            assert_eq!(Kind::from_kind(kind.kind()), Some(kind));
        }
        assert_eq!(Kind::Sandbox.resource(), "sandboxes.agents.x-k8s.io");
    }
}
