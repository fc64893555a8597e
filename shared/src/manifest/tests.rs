//! Table-driven tests for `read_documents`: YAML splitting, indexes and lines, errors, YAML
//! scalar quirks, `kind: List`, JSON and hostile input.

use super::*;

/// One input and the summary of what `read_documents` should return for it.
struct Case<'a> {
    /// What the case checks.
    name: &'a str,
    /// The manifest text.
    input: &'a str,
    /// One line per result, as produced by `summary`.
    want: &'a [&'a str],
}

/// Renders results as `doc INDEX (line LINE): JSON` (with ` item N` for List items) or as the
/// error's `Display`, with object keys sorted whatever serde_json's features.
fn summary(results: &[Result<Document, ParseError>]) -> Vec<String> {
    results
        .iter()
        .map(|result| match result {
            Ok(doc) => {
                let mut value = doc.value.clone();
                value.sort_all_objects();
                let item = doc.item.map(|i| format!(" item {i}")).unwrap_or_default();
                format!("doc {} (line {}){item}: {value}", doc.index, doc.line)
            }
            Err(err) => err.to_string(),
        })
        .collect()
}

/// Runs each case and compares the summary of its results.
fn check(cases: &[Case<'_>]) {
    for Case { name, input, want } in cases {
        let got = summary(&read_documents(input));
        assert_eq!(got, *want, "{name}");
    }
}

#[test]
fn yaml_splitting() {
    check(&[
        Case {
            name: "single doc",
            input: "apiVersion: v1\nkind: A\n",
            want: &[r#"doc 1 (line 1): {"apiVersion":"v1","kind":"A"}"#],
        },
        Case {
            name: "leading ---",
            input: "---\nkind: A\n",
            want: &[r#"doc 1 (line 2): {"kind":"A"}"#],
        },
        Case {
            name: "trailing ---",
            input: "kind: A\n---\n",
            want: &[r#"doc 1 (line 1): {"kind":"A"}"#],
        },
        Case {
            name: "empty docs between markers",
            input: "---\n---\nkind: A\n---\n\n---\n---\nkind: B\n",
            want: &[
                r#"doc 1 (line 3): {"kind":"A"}"#,
                r#"doc 2 (line 8): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "--- # comment marker lines",
            input: "--- # first\nkind: A\n---\t# second\n\nkind: B\n",
            want: &[
                r#"doc 1 (line 2): {"kind":"A"}"#,
                r#"doc 2 (line 5): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "content on the marker line",
            input: "--- {kind: A}\n--- |\n  text\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 2): document must be a mapping with apiVersion and kind, got a string",
            ],
        },
        Case {
            name: "indented --- and ---x are not markers",
            input: "kind: A\ndata: |\n  ---\n  b\nx: ---x\n",
            want: &[r#"doc 1 (line 1): {"data":"---\nb\n","kind":"A","x":"---x"}"#],
        },
        Case {
            name: "... end marker",
            input: "kind: A\n...\n---\nkind: B\n... # done\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                r#"doc 2 (line 4): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "bare document after ...",
            input: "kind: A\n...\nkind: B\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                r#"doc 2 (line 3): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "comments-only and null docs take no index",
            input: "# header\n---\n# only a comment\n---\n~\n--- null\n---\nkind: A\n",
            want: &[r#"doc 1 (line 8): {"kind":"A"}"#],
        },
        Case {
            name: "directives belong to the next document",
            input: "%YAML 1.2\n---\nkind: A\n...\n%YAML 1.2\n%TAG ! tag:x.com,2000:\n---\nkind: B\n",
            want: &[
                r#"doc 1 (line 3): {"kind":"A"}"#,
                r#"doc 2 (line 8): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "empty input",
            input: "",
            want: &[],
        },
        Case {
            name: "blank lines and markers only",
            input: "\n  \n---\n...\n---\n",
            want: &[],
        },
    ]);
}

#[test]
fn yaml_errors() {
    check(&[
        Case {
            name: "2nd of 3 docs broken",
            input: "kind: A\n---\n# B\nkind: B\nmetadata: {name: [x}\n---\nkind: C\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 5, column 18): mismatched bracket '[' closed by '}'",
                r#"doc 3 (line 7): {"kind":"C"}"#,
            ],
        },
        Case {
            name: "tab indentation",
            input: "kind: A\n---\nkind: B\nspec:\n\tx: 1\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 5, column 2): tabs disallowed within this context (block indentation)",
            ],
        },
        Case {
            name: "duplicate keys",
            input: "kind: A\nmetadata:\n  name: a\n  name: b\n---\nkind: B\nkind: C\n",
            want: &[
                "document 1 (line 4, column 3): duplicate mapping key `name` is not allowed here",
                "document 2 (line 7, column 1): duplicate mapping key `kind` is not allowed here",
            ],
        },
        Case {
            name: "not a mapping",
            input: "- a\n---\nhello\n---\n42\n---\ntrue\n",
            want: &[
                "document 1 (line 1): document must be a mapping with apiVersion and kind, got a sequence",
                "document 2 (line 3): document must be a mapping with apiVersion and kind, got a string",
                "document 3 (line 5): document must be a mapping with apiVersion and kind, got a number",
                "document 4 (line 7): document must be a mapping with apiVersion and kind, got a boolean",
            ],
        },
        Case {
            name: "unknown alias",
            input: "kind: A\nspec: *nope\n",
            want: &["document 1 (line 2, column 7): alias refers to an undefined anchor"],
        },
        Case {
            name: "non-finite float",
            input: "kind: A\nx: .inf\n",
            want: &["document 1 (line 2, column 4): value `.inf` is not a finite number"],
        },
        Case {
            name: "control characters in messages are escaped",
            input: "\"a\\nb\": 1\n\"a\\nb\": 2\n",
            want: &[
                r"document 1 (line 2, column 1): duplicate mapping key `a\nb` is not allowed here",
            ],
        },
    ]);
}

#[test]
fn yaml_scalars() {
    check(&[
        Case {
            name: "YAML 1.1 booleans, as kubectl reads them",
            input: "kind: A\na: on\nb: yes\nc: no\nd: off\ne: y\nf: true\ng: False\n",
            want: &[
                r#"doc 1 (line 1): {"a":true,"b":true,"c":false,"d":false,"e":true,"f":true,"g":false,"kind":"A"}"#,
            ],
        },
        Case {
            name: "numbers; a leading 0 means octal as in kubectl",
            input: "kind: A\nport: 8080\nquoted: \"8080\"\nfloat: 1.0\nmode: 0644\noctal: 0o644\n\
                    hex: 0x1F\nexp: 1e3\nbig: 18446744073709551616\nneg: -3\n",
            want: &[
                r#"doc 1 (line 1): {"big":1.8446744073709552e+19,"exp":1000.0,"float":1.0,"hex":31,"kind":"A","mode":420,"neg":-3,"octal":420,"port":8080,"quoted":"8080"}"#,
            ],
        },
        Case {
            name: "nulls",
            input: "kind: A\na: ~\nb: null\nc:\nd: Null\n",
            want: &[r#"doc 1 (line 1): {"a":null,"b":null,"c":null,"d":null,"kind":"A"}"#],
        },
        Case {
            name: "anchors, aliases and merge keys",
            input: "kind: A\nbase: &b {x: 1, y: 2}\ncopy: *b\nmerged:\n  <<: *b\n  y: 3\n",
            want: &[
                r#"doc 1 (line 1): {"base":{"x":1,"y":2},"copy":{"x":1,"y":2},"kind":"A","merged":{"x":1,"y":3}}"#,
            ],
        },
        Case {
            name: "dates and times stay strings, 1.10 is a float",
            input: "kind: A\ndate: 2024-01-02\ntime: 12:30\nver: 1.10\nsemver: 1.2.3\n",
            want: &[
                r#"doc 1 (line 1): {"date":"2024-01-02","kind":"A","semver":"1.2.3","time":"12:30","ver":1.1}"#,
            ],
        },
        Case {
            name: "CRLF line endings",
            input: "kind: A\r\ndata: |\r\n  x\r\n  y\r\n---\r\nkind: B\r\n--- # c\r\nkind: C\r\n\
                    spec:\r\n\tbad: 1\r\n",
            want: &[
                r#"doc 1 (line 1): {"data":"x\ny\n","kind":"A"}"#,
                r#"doc 2 (line 6): {"kind":"B"}"#,
                "document 3 (line 10, column 2): tabs disallowed within this context (block indentation)",
            ],
        },
        Case {
            name: "BOM",
            input: "\u{feff}kind: A\n---\nkind: B\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                r#"doc 2 (line 3): {"kind":"B"}"#,
            ],
        },
    ]);
}

#[test]
fn lists() {
    check(&[
        Case {
            name: "List expansion",
            input: "kind: A\n---\napiVersion: v1\nkind: List\nitems:\n- kind: B\n- kind: C\n---\nkind: D\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                r#"doc 2 (line 3) item 0: {"kind":"B"}"#,
                r#"doc 2 (line 3) item 1: {"kind":"C"}"#,
                r#"doc 3 (line 9): {"kind":"D"}"#,
            ],
        },
        Case {
            name: "List with a non-mapping item",
            input: "kind: List\nitems:\n- kind: B\n- just a string\n- kind: C\n",
            want: &[
                r#"doc 1 (line 1) item 0: {"kind":"B"}"#,
                "document 1 (line 1): items[1]: document must be a mapping with apiVersion and kind, got a string",
                r#"doc 1 (line 1) item 2: {"kind":"C"}"#,
            ],
        },
        Case {
            name: "List without items; empty List",
            input: "kind: List\n---\nkind: List\nitems: {}\n---\nkind: List\nitems: []\n",
            want: &[
                "document 1 (line 1): kind: List must have an `items` sequence",
                "document 2 (line 3): kind: List must have an `items` sequence",
            ],
        },
        Case {
            name: "JSON List",
            input: r#"{"apiVersion": "v1", "kind": "List", "items": [{"kind": "B"}, 7]}"#,
            want: &[
                r#"doc 1 (line 1) item 0: {"kind":"B"}"#,
                "document 1 (line 1): items[1]: document must be an object with apiVersion and kind, got a number",
            ],
        },
    ]);
}

#[test]
fn json() {
    check(&[
        Case {
            name: "JSON object",
            input: "\n\n  {\n  \"kind\": \"A\",\n  \"n\": 1\n}\n",
            want: &[r#"doc 1 (line 3): {"kind":"A","n":1}"#],
        },
        Case {
            name: "JSON array",
            input: "[\n  {\"kind\": \"A\"},\n  {\"kind\": \"B\"}\n]\n",
            want: &[
                r#"doc 1 (line 2): {"kind":"A"}"#,
                r#"doc 2 (line 3): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "empty JSON array",
            input: "[ ]",
            want: &[],
        },
        Case {
            name: "JSON array with non-objects",
            input: "[{\"kind\": \"A\"}, null, [], \"s\"]",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 1): document must be an object with apiVersion and kind, got null",
                "document 3 (line 1): document must be an object with apiVersion and kind, got an array",
                "document 4 (line 1): document must be an object with apiVersion and kind, got a string",
            ],
        },
        Case {
            name: "duplicate JSON keys",
            input: "{\"kind\": \"A\",\n \"kind\": \"B\"}\n",
            want: &["document 1 (line 2, column 7): duplicate key \"kind\""],
        },
        Case {
            name: "typed list from the API",
            input: r#"{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "SandboxList", "metadata": {}, "items": [{"kind": "Sandbox"}]}"#,
            want: &[r#"doc 1 (line 1) item 0: {"kind":"Sandbox"}"#],
        },
        Case {
            name: "a kind ending in List without items is a document",
            input: r#"{"kind": "AllowList", "spec": {}}"#,
            want: &[r#"doc 1 (line 1): {"kind":"AllowList","spec":{}}"#],
        },
        Case {
            name: "concatenated JSON objects",
            input: "{\"kind\": \"A\"}\n{\"kind\": \"B\"}{\"kind\": \"C\"}\n[{\"kind\": \"D\"}]\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                r#"doc 2 (line 2): {"kind":"B"}"#,
                r#"doc 3 (line 2): {"kind":"C"}"#,
                r#"doc 4 (line 3): {"kind":"D"}"#,
            ],
        },
        Case {
            name: "broken JSON object; nothing after it can be read",
            input: "{\"kind\": \"A\"}\n{\n  \"kind\" \"B\"\n}\n{\"kind\": \"C\"}\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 3, column 10): expected `:`",
            ],
        },
        Case {
            name: "broken JSON on the first line of an element",
            input: "[{\"kind\": \"A\"},   {\"kind\": tru}]",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 1, column 31): expected ident",
            ],
        },
        Case {
            name: "trailing comma in JSON array",
            input: "[\n  {\"kind\": \"A\"},\n]\n",
            want: &[
                r#"doc 1 (line 2): {"kind":"A"}"#,
                "document 2 (line 3, column 1): expected value",
            ],
        },
        Case {
            name: "missing comma in JSON array",
            input: "[{\"kind\": \"A\"}\n {\"kind\": \"B\"}]",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 2, column 2): expected `,` or `]` after array element",
            ],
        },
        Case {
            name: "unterminated JSON array",
            input: "[{\"kind\": \"A\"}\n",
            want: &[
                r#"doc 1 (line 1): {"kind":"A"}"#,
                "document 2 (line 2, column 1): EOF while parsing a list",
            ],
        },
        Case {
            name: "a YAML flow mapping first is read as JSON, like kubectl does",
            input: "{kind: A}\n",
            want: &["document 1 (line 1, column 2): key must be a string"],
        },
        Case {
            name: "JSON with CRLF and BOM",
            input: "\u{feff}[\r\n  {\"kind\": \"A\"},\r\n  {\"kind\": \"B\"}\r\n]\r\n",
            want: &[
                r#"doc 1 (line 2): {"kind":"A"}"#,
                r#"doc 2 (line 3): {"kind":"B"}"#,
            ],
        },
    ]);
}

#[test]
fn hostile_input() {
    // A billion laughs: 10^9 `x` once every alias is expanded.
    let bomb = concat!(
        "kind: A\n",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n",
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n",
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
        "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n",
        "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
        "---\n",
        "kind: B\n",
    );
    let deep = |open: &str, n: usize, close: &str| open.repeat(n) + &close.repeat(n);
    check(&[
        Case {
            name: "alias bomb",
            input: bomb,
            want: &[
                "document 1 (line 7, column 12): document too large (more than 250000 nodes with aliases expanded)",
                r#"doc 2 (line 12): {"kind":"B"}"#,
            ],
        },
        Case {
            name: "deep YAML flow nesting",
            input: &format!("kind: A\nx: {}", "[".repeat(10_000)),
            want: &["document 1 (line 2, column 259): recursion limit exceeded"],
        },
        Case {
            name: "deep YAML block nesting",
            input: &format!("kind: A\nx:\n{}a\n", "- ".repeat(10_000)),
            want: &[
                "document 1 (line 3, column 127): document nested too deeply (more than 64 levels)",
            ],
        },
        Case {
            name: "YAML nesting at the limit is fine",
            input: &format!("kind: A\nx: {}", deep("[", 63, "]")),
            want: &[&format!(
                r#"doc 1 (line 1): {{"kind":"A","x":{}}}"#,
                deep("[", 63, "]")
            )],
        },
        Case {
            name: "YAML nesting just over the limit",
            input: &format!("kind: A\nx: {}", deep("[", 64, "]")),
            want: &[
                "document 1 (line 2, column 67): document nested too deeply (more than 64 levels)",
            ],
        },
        Case {
            name: "deep JSON array nesting",
            input: &"[".repeat(10_000),
            want: &["document 1 (line 1, column 129): recursion limit exceeded"],
        },
        Case {
            name: "deep JSON nesting in an object",
            input: &format!("{{\"kind\": \"A\", \"x\": {}", "[".repeat(10_000)),
            want: &["document 1 (line 1, column 146): recursion limit exceeded"],
        },
        Case {
            name: "JSON nesting at the limit is fine",
            input: &format!("{{\"kind\": \"A\", \"x\": {}}}", deep("[", 126, "]")),
            want: &[&format!(
                r#"doc 1 (line 1): {{"kind":"A","x":{}}}"#,
                deep("[", 126, "]")
            )],
        },
    ]);
}

#[test]
fn parse_error_display() {
    let err = ParseError {
        index: 3,
        line: 7,
        column: None,
        message: "bad".to_owned(),
    };
    assert_eq!(err.to_string(), "document 3 (line 7): bad");
    let err = ParseError {
        column: Some(2),
        ..err
    };
    assert_eq!(err.to_string(), "document 3 (line 7, column 2): bad");
}
