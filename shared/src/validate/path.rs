//! Field paths in the Kubernetes style (`spec.containers[0].ports[1]`,
//! `metadata.labels[app.kubernetes.io/name]`), built while walking a document.

use std::fmt;

use super::text::clean;

/// A path from the document root to a field, cheap to extend and shrink while walking.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Field(String),
    Index(usize),
    Key(String),
}

impl FieldPath {
    /// The empty path (the document root).
    pub fn root() -> Self {
        Self::default()
    }

    /// A path made of dotted field names, e.g. `FieldPath::of(&["spec", "replicas"])`.
    pub fn of(fields: &[&str]) -> Self {
        let mut path = Self::root();
        for f in fields {
            path.segments.push(Segment::Field((*f).to_owned()));
        }
        path
    }

    /// This path extended by a field name.
    pub fn field(&self, name: &str) -> Self {
        let mut p = self.clone();
        p.segments.push(Segment::Field(name.to_owned()));
        p
    }

    /// This path extended by a list index.
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.segments.push(Segment::Index(i));
        p
    }

    /// This path extended by a map key.
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.segments.push(Segment::Key(k.to_owned()));
        p
    }

    /// True for the document root.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("(document)");
        }
        for (i, seg) in self.segments.iter().enumerate() {
            match seg {
                Segment::Field(name) if i == 0 => f.write_str(&clean(name))?,
                Segment::Field(name) => write!(f, ".{}", clean(name))?,
                Segment::Index(idx) => write!(f, "[{idx}]")?,
                Segment::Key(key) => write!(f, "[{}]", clean(key))?,
            }
        }
        Ok(())
    }
}
