//! Table-driven tests of the string condition operators against the IAM User Guide, one table
//! per operator, driven through `parse` and `evaluate`; the table harness shared with
//! `arn_bool_null_tests`. Pure: no IO.
//!
//! Rows cite: [ops] "IAM JSON policy elements: Condition operators" (its "Important" note on
//! absent keys, and the String, Boolean, ARN, `...IfExists` and Null sections); [sets]
//! "Single-valued vs. multivalued context keys" with "Set operators for multivalued context keys"
//! (`ForAllValues`, `ForAnyValue`, "empty data set"); [vars] "IAM policy elements: Variables and
//! tags" (the special characters `${*}`, `${?}`, `${$}`); [cond] "IAM JSON policy elements:
//! Condition" (several values of one key are OR-ed, several keys and operators AND-ed).

use super::*;

/// What the request holds for the condition's key.
#[derive(Clone, Copy, Debug)]
pub(super) enum Key {
    /// Known to be absent from the request.
    Absent,
    /// Not known here (a key only AWS knows).
    Unknown,
    /// Present, with these values.
    Has(&'static [&'static str]),
}

pub(super) use Key::{Absent, Has, Unknown};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Match,
    NoMatch,
    Undecided,
}

pub(super) use Outcome::{Match, NoMatch, Undecided};

/// (the key's values in the condition, as JSON; what the request holds; the expected outcome).
pub(super) type Row = (&'static str, Key, Outcome);

const KEY: &str = "test:Key";

/// The outcome of an `Allow` statement whose only condition is `operator: {KEY: values}`.
fn outcome(operator: &str, values: &str, key: Key) -> Outcome {
    let doc = format!(
        r#"{{"Statement":{{"Effect":"Allow","Action":"*","Resource":"*","Condition":{{"{operator}":{{"{KEY}":{values}}}}}}}}}"#
    );
    let policy = parse(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let context = match key {
        Absent => RequestContext::new().without(KEY),
        Unknown => RequestContext::new(),
        Has(values) => RequestContext::new().with(KEY, values),
    };
    let decision = evaluate(
        &[Named {
            name: "p",
            policy: &policy,
        }],
        &Request {
            principal: None,
            action: "svc:Act",
            resource: "*",
            context: &context,
        },
    );
    match decision {
        Decision::Allowed(_) => Match,
        Decision::ImplicitDeny => NoMatch,
        Decision::Undecided(_) => Undecided,
        Decision::ExplicitDeny(_) => panic!("an Allow-only policy denied: {decision:?}"),
    }
}

/// Collects every row that gives another outcome than expected, then fails listing them all.
#[derive(Default)]
pub(super) struct Table(Vec<String>);

impl Table {
    /// Checks `rows` under the operator named `operator`.
    pub(super) fn rows(&mut self, operator: &str, rows: &[Row]) -> &mut Self {
        for (i, &(values, key, want)) in rows.iter().enumerate() {
            let got = outcome(operator, values, key);
            if got != want {
                self.0.push(format!(
                    "{operator} row {}: {values} against {key:?} gave {got:?}, want {want:?}",
                    i + 1
                ));
            }
        }
        self
    }

    pub(super) fn verify(&self) {
        assert!(self.0.is_empty(), "\n{}", self.0.join("\n"));
    }
}

#[test]
fn string_equals() {
    let mut t = Table::default();
    t.rows(
        "StringEquals",
        &[
            (r#""ec2.amazonaws.com""#, Has(&["ec2.amazonaws.com"]), Match),
            // [ops] "Exact matching, case sensitive".
            (
                r#""ec2.amazonaws.com""#,
                Has(&["EC2.amazonaws.com"]),
                NoMatch,
            ),
            // [ops] wildcards are StringLike's: StringEquals takes `*` and `?` literally.
            (r#""ec2.*""#, Has(&["ec2.amazonaws.com"]), NoMatch),
            (r#""t?.micro""#, Has(&["t3.micro"]), NoMatch),
            (r#""ec2.*""#, Has(&["ec2.*"]), Match),
            // [vars] `${*}`, `${$}` stand for the characters wherever variables may be used.
            (r#""a${*}b""#, Has(&["a*b"]), Match),
            (r#""a${$}b""#, Has(&["a$b"]), Match),
            // [cond] the values listed for one key are OR-ed.
            (
                r#"["ecs.amazonaws.com","ec2.amazonaws.com"]"#,
                Has(&["ec2.amazonaws.com"]),
                Match,
            ),
            (
                r#"["ecs.amazonaws.com","ec2.amazonaws.com"]"#,
                Has(&["eks.amazonaws.com"]),
                NoMatch,
            ),
            // [ops] "If the key ... is not present in the request context, the values do not
            // match".
            (r#""a""#, Absent, NoMatch),
            // [sets] multivalued keys require a set operator; without one nothing is documented.
            (r#""a""#, Has(&["a", "b"]), Undecided),
            // Policy variables and unknown keys depend on what only AWS knows.
            (r#""${aws:username}""#, Has(&["alice"]), Undecided),
            (r#""a""#, Unknown, Undecided),
            ("[]", Has(&["a"]), Undecided),
        ],
    );
    // [ops] `...IfExists`: "If the key is not present, evaluate the condition element as true".
    t.rows(
        "StringEqualsIfExists",
        &[
            (r#""a""#, Absent, Match),
            (r#""a""#, Has(&["b"]), NoMatch),
            (r#""a""#, Has(&["a"]), Match),
        ],
    );
    // [sets] ForAllValues: every request value matches a policy value; true with no key in the
    // request or an empty data set ("for example, an empty string").
    t.rows(
        "ForAllValues:StringEquals",
        &[
            (r#"["Name","team"]"#, Has(&["team", "Name"]), Match),
            (r#"["Name","team"]"#, Has(&["team", "owner"]), NoMatch),
            (r#"["Name"]"#, Absent, Match),
            (r#"["Name"]"#, Has(&[""]), Match),
            (r#""a""#, Unknown, Undecided),
        ],
    );
    // [sets] ForAnyValue: some request value matches a policy value; false with no key.
    t.rows(
        "ForAnyValue:StringEquals",
        &[
            (r#"["team"]"#, Has(&["Name", "team"]), Match),
            (r#"["team"]"#, Has(&["Name", "owner"]), NoMatch),
            (r#"["team"]"#, Absent, NoMatch),
        ],
    );
    // [sets] ForAnyValue stays false without the key under IfExists: IAM answers so (re:Post
    // "ForAnyValue:StringEqualsIfExists behaving unexpectedly").
    t.rows(
        "ForAnyValue:StringEqualsIfExists",
        &[(r#""team""#, Absent, NoMatch)],
    );
    t.rows(
        "ForAllValues:StringEqualsIfExists",
        &[(r#""a""#, Has(&["a", "x"]), NoMatch)],
    );
    t.verify();
}

#[test]
fn string_not_equals() {
    let mut t = Table::default();
    t.rows(
        "StringNotEquals",
        &[
            (r#""a""#, Has(&["b"]), Match),
            (r#""a""#, Has(&["a"]), NoMatch),
            // [ops] "Negated matching" of the case-sensitive comparison.
            (r#""a""#, Has(&["A"]), Match),
            // [ops] no wildcards: `a*` differs from `abc`.
            (r#""a*""#, Has(&["abc"]), Match),
            // [cond] listed values are OR-ed, so the negation holds only when none matches.
            (r#"["a","b"]"#, Has(&["b"]), NoMatch),
            (r#"["a","b"]"#, Has(&["c"]), Match),
            // [ops] a negated operator on an absent key is true.
            (r#""a""#, Absent, Match),
            (r#""a""#, Has(&["b", "c"]), Undecided),
            (r#""a""#, Unknown, Undecided),
        ],
    );
    t.rows(
        "StringNotEqualsIfExists",
        &[(r#""a""#, Absent, Match), (r#""a""#, Has(&["a"]), NoMatch)],
    );
    // [sets] ForAllValues with a negated operator: no request value equals a listed one.
    t.rows(
        "ForAllValues:StringNotEquals",
        &[
            (r#""aws:x""#, Has(&["Name", "team"]), Match),
            (r#""aws:x""#, Has(&["Name", "aws:x"]), NoMatch),
            (r#""aws:x""#, Absent, Match),
        ],
    );
    // [sets] ForAnyValue with a negated operator: some request value differs from all listed
    // ones; false with no key, negated operator or not.
    t.rows(
        "ForAnyValue:StringNotEquals",
        &[
            (r#""a""#, Has(&["a", "b"]), Match),
            (r#""a""#, Has(&["a"]), NoMatch),
            (r#""a""#, Absent, NoMatch),
        ],
    );
    t.verify();
}

#[test]
fn string_equals_ignore_case() {
    let mut t = Table::default();
    t.rows(
        "StringEqualsIgnoreCase",
        &[
            // [ops] "Exact matching, ignoring case".
            (r#""JohnDoe""#, Has(&["johndoe"]), Match),
            (r#""JohnDoe""#, Has(&["janedoe"]), NoMatch),
            // Case is ignored beyond ASCII too.
            (r#""ÄRGER""#, Has(&["ärger"]), Match),
            // [ops] still exact: no wildcards.
            (r#""john*""#, Has(&["johndoe"]), NoMatch),
            (r#""a""#, Absent, NoMatch),
        ],
    );
    t.rows(
        "StringEqualsIgnoreCaseIfExists",
        &[(r#""a""#, Absent, Match), (r#""a""#, Has(&["B"]), NoMatch)],
    );
    t.rows(
        "ForAllValues:StringEqualsIgnoreCase",
        &[
            (r#"["name","team"]"#, Has(&["Name", "TEAM"]), Match),
            (r#"["name"]"#, Has(&["Name", "TEAM"]), NoMatch),
        ],
    );
    t.rows(
        "ForAnyValue:StringEqualsIgnoreCase",
        &[
            (r#"["team"]"#, Has(&["Name", "TEAM"]), Match),
            (r#"["team"]"#, Absent, NoMatch),
        ],
    );
    t.verify();
}

#[test]
fn string_not_equals_ignore_case() {
    let mut t = Table::default();
    t.rows(
        "StringNotEqualsIgnoreCase",
        &[
            // [ops] "Negated matching, ignoring case".
            (r#""JohnDoe""#, Has(&["JOHNDOE"]), NoMatch),
            (r#""JohnDoe""#, Has(&["janedoe"]), Match),
            // [ops] a negated operator on an absent key is true.
            (r#""a""#, Absent, Match),
            (r#"["a","b"]"#, Has(&["B"]), NoMatch),
        ],
    );
    t.rows(
        "ForAllValues:StringNotEqualsIgnoreCase",
        &[
            (r#""a""#, Has(&["B", "c"]), Match),
            (r#""a""#, Has(&["B", "A"]), NoMatch),
        ],
    );
    t.rows(
        "ForAnyValue:StringNotEqualsIgnoreCase",
        &[
            (r#""a""#, Has(&["A", "b"]), Match),
            (r#""a""#, Has(&["A"]), NoMatch),
            (r#""a""#, Absent, NoMatch),
        ],
    );
    t.verify();
}

/// [ops] the ARN section's example: StringLike's `*` spans colons, ArnLike's does not.
pub(super) const SPANNING_PATTERN: &str = r#""arn:aws:someservice:*:111122223333:finance/*""#;
pub(super) const SPANNING_VALUE: &str =
    "arn:aws:someservice:us-east-2:999999999999:store/abc:111122223333:finance/document.txt";

#[test]
fn string_like() {
    let mut t = Table::default();
    t.rows(
        "StringLike",
        &[
            // [ops] case-sensitive, `*` for any characters and `?` for one, anywhere.
            (r#""ec2.*""#, Has(&["ec2.amazonaws.com"]), Match),
            (r#""EC2.*""#, Has(&["ec2.amazonaws.com"]), NoMatch),
            (r#""t?.micro""#, Has(&["t3.micro"]), Match),
            (r#""t?.micro""#, Has(&["t3a.micro"]), NoMatch),
            // [ops] "You must specify wildcards to achieve partial string matches."
            (r#""ec2""#, Has(&["ec2.amazonaws.com"]), NoMatch),
            // [vars] an escaped `*` matches only itself.
            (r#""a${*}""#, Has(&["ab"]), NoMatch),
            (r#""a${*}""#, Has(&["a*"]), Match),
            (SPANNING_PATTERN, Has(&[SPANNING_VALUE]), Match),
            (r#"["t1.*","m3.*"]"#, Has(&["m3.large"]), Match),
            (r#""*""#, Absent, NoMatch),
            (
                r#""home/${aws:username}/*""#,
                Has(&["home/alice/x"]),
                Undecided,
            ),
        ],
    );
    // [ops] the `StringLikeIfExists` example: resources without the key pass.
    t.rows(
        "StringLikeIfExists",
        &[
            (r#"["t1.*","t2.*","m3.*"]"#, Absent, Match),
            (r#"["t1.*","t2.*","m3.*"]"#, Has(&["c5.large"]), NoMatch),
        ],
    );
    // [sets] the DynamoDB examples.
    t.rows(
        "ForAllValues:StringLike",
        &[
            (
                r#"["PostDateTime","Message"]"#,
                Has(&["PostDateTime", "Message"]),
                Match,
            ),
            (
                r#"["PostDateTime","Message"]"#,
                Has(&["PostDateTime", "UserName"]),
                NoMatch,
            ),
            (r#"["karpenter.sh/*"]"#, Absent, Match),
        ],
    );
    t.rows(
        "ForAnyValue:StringLike",
        &[
            (
                r#"["ID","PostDateTime"]"#,
                Has(&["UserName", "PostDateTime"]),
                Match,
            ),
            (r#"["ID","PostDateTime"]"#, Has(&["UserName"]), NoMatch),
            (r#""*""#, Absent, NoMatch),
        ],
    );
    t.verify();
}

#[test]
fn string_not_like() {
    let mut t = Table::default();
    t.rows(
        "StringNotLike",
        &[
            (r#""ec2.*""#, Has(&["lambda.amazonaws.com"]), Match),
            (r#""ec2.*""#, Has(&["ec2.amazonaws.com"]), NoMatch),
            // [ops] "Negated case-sensitive matching".
            (r#""ec2.*""#, Has(&["EC2.amazonaws.com"]), Match),
            // [cond] OR-ed values: the negation needs every pattern to miss.
            (r#"["a*","b*"]"#, Has(&["bc"]), NoMatch),
            // [ops] the "Important" note names StringNotLike: absent key, condition true.
            (r#""*""#, Absent, Match),
        ],
    );
    t.rows(
        "StringNotLikeIfExists",
        &[
            (r#""a*""#, Absent, Match),
            (r#""a*""#, Has(&["ab"]), NoMatch),
        ],
    );
    t.rows(
        "ForAllValues:StringNotLike",
        &[
            (r#""aws:*""#, Has(&["Name", "team"]), Match),
            (r#""aws:*""#, Has(&["Name", "aws:x"]), NoMatch),
            (r#""aws:*""#, Absent, Match),
        ],
    );
    t.rows(
        "ForAnyValue:StringNotLike",
        &[
            (r#""aws:*""#, Has(&["aws:x", "Name"]), Match),
            (r#""aws:*""#, Has(&["aws:x"]), NoMatch),
            (r#""aws:*""#, Absent, NoMatch),
        ],
    );
    t.verify();
}

/// [cond] several keys under one operator, and several operators, must all hold.
#[test]
fn keys_and_operator_blocks_are_and_ed() {
    let decide = |condition: &str, context: &RequestContext| {
        let doc = format!(
            r#"{{"Statement":{{"Effect":"Allow","Action":"*","Resource":"*","Condition":{condition}}}}}"#
        );
        let policy = parse(&doc).expect("policy");
        evaluate(
            &[Named {
                name: "p",
                policy: &policy,
            }],
            &Request {
                principal: None,
                action: "svc:Act",
                resource: "*",
                context,
            },
        )
    };
    let ctx = |a: &str, b: &str| {
        RequestContext::new()
            .with_value("test:a", a)
            .with_value("test:b", b)
    };
    let two_keys = r#"{"StringEquals":{"test:a":"1","test:b":"2"}}"#;
    assert!(decide(two_keys, &ctx("1", "2")).is_allowed());
    assert_eq!(decide(two_keys, &ctx("1", "3")), Decision::ImplicitDeny);
    assert_eq!(decide(two_keys, &ctx("3", "2")), Decision::ImplicitDeny);
    let two_blocks = r#"{"StringEquals":{"test:a":"1"},"StringLike":{"test:b":"2*"}}"#;
    assert!(decide(two_blocks, &ctx("1", "20")).is_allowed());
    assert_eq!(decide(two_blocks, &ctx("1", "30")), Decision::ImplicitDeny);
    assert_eq!(decide(two_blocks, &ctx("0", "20")), Decision::ImplicitDeny);
    // A failing condition decides even next to one that cannot be decided.
    let with_unknown = r#"{"StringEquals":{"test:a":"1","test:unknown":"x"}}"#;
    assert_eq!(decide(with_unknown, &ctx("0", "2")), Decision::ImplicitDeny);
    assert!(matches!(
        decide(with_unknown, &ctx("1", "2")),
        Decision::Undecided(_)
    ));
}
