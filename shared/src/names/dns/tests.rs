use super::*;

struct Case {
    name: &'static str,
    input: String,
    want: Result<(), NameError>,
}

fn case(name: &'static str, input: impl Into<String>, want: Result<(), NameError>) -> Case {
    Case {
        name,
        input: input.into(),
        want,
    }
}

fn run(check: fn(&str) -> Result<(), NameError>, cases: Vec<Case>) {
    for Case { name, input, want } in cases {
        let got = check(&input);
        assert_eq!(got, want, "{name}");
    }
}

fn bad(part: NamePart, rule: &'static str, found: char, position: usize) -> Result<(), NameError> {
    Err(NameError::InvalidChar {
        part,
        rule,
        found,
        position,
    })
}

fn too_long(part: NamePart, max: usize, got: usize) -> Result<(), NameError> {
    Err(NameError::TooLong { part, max, got })
}

const W: NamePart = NamePart::Whole;
const EMPTY: Result<(), NameError> = Err(NameError::Empty {
    part: NamePart::Whole,
});

#[test]
fn dns1123_label() {
    let rule = DNS1123_LABEL_RULE;
    run(
        validate_dns1123_label,
        vec![
            case("simple", "my-sandbox", Ok(())),
            case("one char", "a", Ok(())),
            case("all digits", "8080", Ok(())),
            case("63 chars", "a".repeat(63), Ok(())),
            case("punycode", "xn--bcher-kva", Ok(())),
            case("empty", "", EMPTY),
            case("64 chars", "a".repeat(64), too_long(W, 63, 64)),
            case("uppercase", "Abc", bad(W, rule, 'A', 0)),
            case("leading dash", "-x", bad(W, rule, '-', 0)),
            case("trailing dash", "x-", bad(W, rule, '-', 1)),
            case("underscore", "a_b", bad(W, rule, '_', 1)),
            case("dot", "a.b", bad(W, rule, '.', 1)),
            case("non-ascii", "bücher", bad(W, rule, 'ü', 1)),
            case("space", "a b", bad(W, rule, ' ', 1)),
        ],
    );
}

#[test]
fn dns1123_subdomain() {
    let rule = DNS1123_SUBDOMAIN_RULE;
    let long_ok = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    run(
        validate_dns1123_subdomain,
        vec![
            case("single label", "example", Ok(())),
            case("dotted", "sandbox.example.com", Ok(())),
            case("253 chars", long_ok.clone(), Ok(())),
            case("254 chars", format!("{long_ok}d"), too_long(W, 253, 254)),
            case("empty", "", EMPTY),
            case("leading dot", ".a", bad(W, rule, '.', 0)),
            case("trailing dot", "a.", bad(W, rule, '.', 1)),
            case("double dot", "a..b", bad(W, rule, '.', 1)),
            case("dash before dot", "a-.b", bad(W, rule, '-', 1)),
            case("dash after dot", "a.-b", bad(W, rule, '-', 2)),
            case("uppercase in second label", "a.Bc", bad(W, rule, 'B', 2)),
            case("underscore", "a.b_c", bad(W, rule, '_', 3)),
        ],
    );
}

#[test]
fn dns1035_label() {
    let rule = DNS1035_LABEL_RULE;
    run(
        validate_dns1035_label,
        vec![
            case("simple", "web-1", Ok(())),
            case("letter only", "a", Ok(())),
            case("leading digit", "1web", bad(W, rule, '1', 0)),
            case("trailing dash", "web-", bad(W, rule, '-', 3)),
            case("64 chars", "a".repeat(64), too_long(W, 63, 64)),
            case("empty", "", EMPTY),
        ],
    );
}

#[test]
fn label_and_annotation_keys() {
    let rule = QUALIFIED_NAME_RULE;
    let sub = DNS1123_SUBDOMAIN_RULE;
    let name = NamePart::Name;
    let prefix = NamePart::Prefix;
    let cases = || {
        vec![
            case("plain", "app", Ok(())),
            case("mixed case and symbols", "My_App.v-1", Ok(())),
            case("prefixed", "agents.x-k8s.io/sandbox-name-hash", Ok(())),
            case("63 char name", "a".repeat(63), Ok(())),
            case("64 char name", "a".repeat(64), too_long(name, 63, 64)),
            case("empty", "", Err(NameError::Empty { part: name })),
            case(
                "empty name after prefix",
                "example.com/",
                Err(NameError::Empty { part: name }),
            ),
            case(
                "empty prefix",
                "/app",
                Err(NameError::Empty { part: prefix }),
            ),
            case(
                "uppercase prefix",
                "Example.com/app",
                bad(prefix, sub, 'E', 0),
            ),
            case("bad prefix label", "a..b/app", bad(prefix, sub, '.', 1)),
            case(
                "leading dot name",
                "example.com/.app",
                bad(name, rule, '.', 12),
            ),
            case("trailing dash name", "app-", bad(name, rule, '-', 3)),
            case("space", "my app", bad(name, rule, ' ', 2)),
            case(
                "two slashes",
                "a/b/c",
                Err(NameError::ExtraSlash { position: 3 }),
            ),
            case(
                "long prefix",
                format!("{}/a", "a".repeat(254)),
                too_long(prefix, 253, 254),
            ),
        ]
    };
    run(validate_label_key, cases());
    // Annotation keys are checked lower-cased, as the API server does.
    let annotation_cases = cases()
        .into_iter()
        .map(|mut c| {
            if c.name == "uppercase prefix" {
                c.want = Ok(());
            }
            c
        })
        .collect();
    run(validate_annotation_key, annotation_cases);
}

#[test]
fn label_values() {
    let rule = QUALIFIED_NAME_RULE;
    run(
        validate_label_value,
        vec![
            case("empty is allowed", "", Ok(())),
            case("hash", "374de8f5", Ok(())),
            case("mixed", "Warm_Pool.v-2", Ok(())),
            case("63 chars", "z".repeat(63), Ok(())),
            case("64 chars", "z".repeat(64), too_long(W, 63, 64)),
            case("slash", "a/b", bad(W, rule, '/', 1)),
            case("leading underscore", "_a", bad(W, rule, '_', 0)),
        ],
    );
}

#[test]
fn messages_are_actionable() {
    let cases = [
        (
            "too long",
            validate_dns1123_label(&"a".repeat(64)),
            "must be no more than 63 characters (got 64)",
        ),
        (
            "bad char",
            validate_dns1123_label("Abc"),
            "must consist of lower case alphanumeric characters or '-', and must start and end \
             with an alphanumeric character (found 'A' at position 0)",
        ),
        (
            "prefix",
            validate_label_key("/a"),
            "prefix part must not be empty",
        ),
    ];
    for (name, got, want) in cases {
        let got = got.map_err(|e| e.message());
        assert_eq!(got, Err(want.to_owned()), "{name}");
    }
}

#[test]
fn control_characters_are_escaped_in_messages() {
    let got = validate_label_value("a\nb").map_err(|e| e.to_string());
    let want = Err(format!("{QUALIFIED_NAME_RULE} (found '\\n' at position 1)"));
    assert_eq!(got, want);
}
