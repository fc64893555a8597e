//! Query parameters of API requests: percent-decoding and typed access.

use super::selector::Selector;
use super::status::Result;

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..=i + 2]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// The decoded query parameters of a request.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Decodes a query string (`a=b&c=d`, percent-encoded).
    pub fn parse(query: Option<&str>) -> Self {
        Self(parse_pairs(query))
    }

    /// All pairs, in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `name` is `true` or `1`.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("true" | "1"))
    }

    /// The selector in parameter `name` (empty when absent).
    pub fn selector(&self, name: &str) -> Result<Selector> {
        Selector::parse(self.get(name).unwrap_or_default(), name)
    }
}

#[cfg(test)]
mod tests {
    use super::Query;

    #[test]
    fn decodes_parameters() {
        let query = Query::parse(Some(
            "labelSelector=app%20in%20%28a%2Cb%29&watch=1&x=a+b&bad=%zz&end=%4",
        ));
        assert_eq!(query.get("labelSelector"), Some("app in (a,b)"));
        assert!(query.flag("watch"));
        assert_eq!(query.get("x"), Some("a b"));
        assert_eq!(query.get("bad"), Some("%zz"));
        assert_eq!(query.get("end"), Some("%4"));
        assert_eq!(query.get("missing"), None);
        assert!(Query::parse(None).pairs().is_empty());
    }
}
