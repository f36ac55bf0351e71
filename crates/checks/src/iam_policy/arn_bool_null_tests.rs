//! Table-driven tests of the ARN, `Bool` and `Null` condition operators, and of operators the
//! evaluator does not implement, against the IAM User Guide (sources as cited in
//! `operator_tests`). Pure: no IO.

use super::operator_tests::{
    Absent, Has, Match, NoMatch, SPANNING_PATTERN, SPANNING_VALUE, Table, Undecided, Unknown,
};

const RULES: &str = r#""arn:aws:events:*:111122223333:rule/*""#;
const RULE: &str = "arn:aws:events:us-west-2:111122223333:rule/karpenter";
const OTHER_ACCOUNTS_RULE: &str = "arn:aws:events:us-west-2:999999999999:rule/karpenter";
const ROLES: &str = r#""arn:aws:iam::1:role/*""#;
const ROLE: &str = "arn:aws:iam::1:role/r";
const INSTANCE: &str = "arn:aws:ec2:r:1:instance/i-1";
const ADMINS: &str = r#""arn:aws:iam::*:role/admin*""#;
const ADMIN: &str = "arn:aws:iam::1:role/admin1";
const TOPIC_OR_QUEUE: &str = r#"["arn:aws:sns:*:1:a","arn:aws:sqs:*:1:q"]"#;
const LOG_STREAM: &str = "arn:aws:logs:r:1:log-group:/eks/d:log-stream:a/b";

/// [ops] "The `ArnEquals` and `ArnLike` condition operators behave identically": every row holds
/// for both names.
#[test]
fn arn_equals_and_arn_like() {
    let mut t = Table::default();
    for name in ["ArnEquals", "ArnLike"] {
        t.rows(
            name,
            &[
                (
                    r#""arn:aws:sns:r:1:topic""#,
                    Has(&["arn:aws:sns:r:1:topic"]),
                    Match,
                ),
                // [ops] each component may hold `*` and `?`, under ArnEquals too.
                (RULES, Has(&[RULE]), Match),
                (
                    r#""arn:aws:iam::1:role/Node?""#,
                    Has(&["arn:aws:iam::1:role/Node1"]),
                    Match,
                ),
                (
                    r#""arn:aws:iam::*:role/*""#,
                    Has(&["arn:aws:iam::1:role/r"]),
                    Match,
                ),
                (RULES, Has(&[OTHER_ACCOUNTS_RULE]), NoMatch),
                // [ops] "Case-sensitive matching of the ARN".
                (
                    r#""arn:aws:iam::1:role/node""#,
                    Has(&["arn:aws:iam::1:role/Node"]),
                    NoMatch,
                ),
                (
                    r#""arn:AWS:iam::1:role/*""#,
                    Has(&["arn:aws:iam::1:role/Node"]),
                    NoMatch,
                ),
                // [ops] the documented example: the region's `*` matches `us-east-2` only, and
                // the match fails on `999999999999:store/abc:` (StringLike matches it).
                (SPANNING_PATTERN, Has(&[SPANNING_VALUE]), NoMatch),
                // The resource is everything after the fifth colon, colons and slashes
                // included.
                (
                    r#""arn:aws:logs:r:1:log-group:/eks/*""#,
                    Has(&[LOG_STREAM]),
                    Match,
                ),
                (
                    r#""arn:aws:logs:r:1:log-group:*""#,
                    Has(&[LOG_STREAM]),
                    Match,
                ),
                // A value that is not an ARN (fewer than six components) does not match.
                (r#""arn:aws:iam::1:*""#, Has(&["arn:aws:iam::1"]), NoMatch),
                (r#""arn:aws:iam::1:*""#, Has(&["not-an-arn"]), NoMatch),
                // [cond] OR-ed values.
                (TOPIC_OR_QUEUE, Has(&["arn:aws:sqs:r:1:q"]), Match),
                // [ops] the SourceArn example: an absent key does not match.
                (RULES, Absent, NoMatch),
                // A condition value that is no ARN: IAM's answer is not documented.
                (r#""*""#, Has(&["arn:aws:iam::1:role/r"]), Undecided),
                (
                    r#""arn:aws:iam::${aws:PrincipalAccount}:role/*""#,
                    Has(&[ROLE]),
                    Undecided,
                ),
                (RULES, Unknown, Undecided),
            ],
        );
        t.rows(
            &format!("{name}IfExists"),
            &[
                (RULES, Absent, Match),
                (RULES, Has(&[OTHER_ACCOUNTS_RULE]), NoMatch),
            ],
        );
        t.rows(
            &format!("ForAllValues:{name}"),
            &[
                (ROLES, Has(&[INSTANCE, ROLE]), NoMatch),
                (ROLES, Has(&[ROLE, "arn:aws:iam::1:role/b"]), Match),
                (ROLES, Absent, Match),
            ],
        );
        t.rows(
            &format!("ForAnyValue:{name}"),
            &[
                (ROLES, Has(&[INSTANCE, ROLE]), Match),
                (ROLES, Has(&[INSTANCE]), NoMatch),
                (ROLES, Absent, NoMatch),
            ],
        );
    }
    t.verify();
}

/// [ops] "Negated matching for ARN. The `ArnNotEquals` and `ArnNotLike` condition operators
/// behave identically": every row holds for both names.
#[test]
fn arn_not_equals_and_arn_not_like() {
    let mut t = Table::default();
    for name in ["ArnNotEquals", "ArnNotLike"] {
        t.rows(
            name,
            &[
                (RULES, Has(&[RULE]), NoMatch),
                (RULES, Has(&[OTHER_ACCOUNTS_RULE]), Match),
                (
                    r#""arn:aws:iam::1:role/node""#,
                    Has(&["arn:aws:iam::1:role/Node"]),
                    Match,
                ),
                // [ops] the documented example, negated: ArnLike fails, so ArnNotLike holds.
                (SPANNING_PATTERN, Has(&[SPANNING_VALUE]), Match),
                // A value that is not an ARN matches no ARN pattern.
                (RULES, Has(&["not-an-arn"]), Match),
                // [cond] OR-ed values: the negation needs every pattern to miss.
                (TOPIC_OR_QUEUE, Has(&["arn:aws:sqs:r:1:q"]), NoMatch),
                // [ops] the "Important" note names ArnNotLike: absent key, condition true.
                (RULES, Absent, Match),
                (r#""arn:aws""#, Has(&["arn:aws:iam::1:role/r"]), Undecided),
            ],
        );
        t.rows(
            &format!("{name}IfExists"),
            &[(RULES, Absent, Match), (RULES, Has(&[RULE]), NoMatch)],
        );
        // [sets] ForAllValues with a negated operator: no request value matches a listed one.
        t.rows(
            &format!("ForAllValues:{name}"),
            &[
                (ADMINS, Has(&[ROLE, "arn:aws:iam::1:role/b"]), Match),
                (ADMINS, Has(&[ROLE, ADMIN]), NoMatch),
                (ADMINS, Absent, Match),
            ],
        );
        // [sets] ForAnyValue with a negated operator: some request value matches none; false
        // with no key.
        t.rows(
            &format!("ForAnyValue:{name}"),
            &[
                (ADMINS, Has(&[ADMIN, ROLE]), Match),
                (ADMINS, Has(&[ADMIN]), NoMatch),
                (ADMINS, Absent, NoMatch),
            ],
        );
    }
    t.verify();
}

#[test]
fn bool() {
    let mut t = Table::default();
    t.rows(
        "Bool",
        &[
            // [ops] the SecureTransport example, with the JSON boolean as written there.
            ("false", Has(&["false"]), Match),
            ("false", Has(&["true"]), NoMatch),
            (r#""true""#, Has(&["true"]), Match),
            // `true` and `false` compare regardless of case.
            (r#""true""#, Has(&["TRUE"]), Match),
            (r#""False""#, Has(&["false"]), Match),
            // A request value that is not a boolean matches neither.
            (r#""true""#, Has(&["1"]), NoMatch),
            (r#""false""#, Has(&["yes"]), NoMatch),
            // [cond] OR-ed values.
            (r#"["true","false"]"#, Has(&["false"]), Match),
            // [ops] an absent key does not match.
            (r#""true""#, Absent, NoMatch),
            // A condition value that is no boolean: IAM's answer is not documented.
            (r#""yes""#, Has(&["yes"]), Undecided),
            (r#""true""#, Has(&["true", "false"]), Undecided),
            (r#""true""#, Unknown, Undecided),
        ],
    );
    t.rows(
        "BoolIfExists",
        &[
            (r#""true""#, Absent, Match),
            (r#""true""#, Has(&["false"]), NoMatch),
        ],
    );
    t.rows(
        "ForAllValues:Bool",
        &[(r#""true""#, Has(&["true", "false"]), NoMatch)],
    );
    t.rows(
        "ForAnyValue:Bool",
        &[(r#""true""#, Has(&["true", "false"]), Match)],
    );
    t.verify();
}

#[test]
fn null() {
    let mut t = Table::default();
    t.rows(
        "Null",
        &[
            // [ops] `true`: the key doesn't exist; `false`: it exists and its value is not null.
            (r#""true""#, Absent, Match),
            (r#""true""#, Has(&["x"]), NoMatch),
            (r#""false""#, Has(&["x"]), Match),
            (r#""false""#, Absent, NoMatch),
            ("true", Has(&["a", "b"]), NoMatch),
            // [sets] "context keys with empty values" fail `Null: false`.
            (r#""false""#, Has(&[""]), NoMatch),
            (r#""true""#, Has(&[""]), Match),
            // [cond] OR-ed values.
            (r#"["true","false"]"#, Absent, Match),
            (r#""maybe""#, Absent, Undecided),
            (r#""true""#, Unknown, Undecided),
        ],
    );
    // [ops] IfExists may be added to any operator "except the Null condition".
    t.rows("NullIfExists", &[(r#""true""#, Absent, Undecided)]);
    t.rows("ForAllValues:Null", &[(r#""true""#, Absent, Undecided)]);
    t.verify();
}

/// Operators not implemented here stay undecided whatever the key, absent keys included.
#[test]
fn operators_not_evaluated_here_stay_undecided() {
    let mut t = Table::default();
    for (operator, values, key) in [
        ("NumericLessThan", r#""3""#, Has(&["1"])),
        ("NumericLessThanIfExists", r#""3""#, Absent),
        ("NumericNotEquals", r#""3""#, Absent),
        ("ForAllValues:NumericEquals", r#""3""#, Absent),
        ("ForAnyValue:NumericEquals", r#""3""#, Absent),
        ("DateGreaterThan", r#""2020-01-01T00:00:01Z""#, Absent),
        ("IpAddress", r#""10.0.0.0/8""#, Has(&["10.1.2.3"])),
        ("NotIpAddress", r#""10.0.0.0/8""#, Absent),
        ("BinaryEquals", r#""QmluYXJ5""#, Absent),
        ("StringEqualsIfExistsIfExists", r#""a""#, Absent),
        ("ForSomeValues:StringEquals", r#""a""#, Has(&["a"])),
        ("stringequals", r#""a""#, Has(&["a"])),
    ] {
        t.rows(operator, &[(values, key, Undecided)]);
    }
    t.verify();
}
