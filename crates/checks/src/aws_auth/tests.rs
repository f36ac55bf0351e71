//! One test per authenticator rule, with inputs shaped like aws-iam-authenticator's own fixtures
//! (`pkg/mapper/configmap/configmap_test.go`: `roleARN`-style keys, mixed case, broken entries
//! beside good ones).

use super::*;
use crate::facts::AwsAuthData;

/// Parses the keys of `data` as the facts hand them over.
fn parse(data: &AwsAuthData) -> AwsAuth {
    super::parse(data.map_roles.as_deref(), data.map_users.as_deref())
}

const NODE_ARN: &str = "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo";

const NODE_ENTRY: &str = "- rolearn: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo
  username: system:node:{{EC2PrivateDNSName}}
  groups:
    - system:bootstrappers
    - system:nodes
";

fn roles(input: &str) -> Vec<RoleMapping> {
    let (roles, problems) = parse_map_roles(input);
    assert!(problems.is_empty(), "unexpected problems: {problems:?}");
    roles
}

#[test]
fn a_well_formed_node_entry_parses() {
    assert_eq!(
        roles(NODE_ENTRY),
        vec![RoleMapping {
            entry: 1,
            rolearn: NODE_ARN.into(),
            username: Some("system:node:{{EC2PrivateDNSName}}".into()),
            groups: vec!["system:bootstrappers".into(), "system:nodes".into()],
        }]
    );
}

#[test]
fn keys_match_case_insensitively_like_go_json() {
    for key in ["rolearn", "roleARN", "RoleArn", "rOlEaRn", "ROLEARN"] {
        let input = format!("- {key}: {NODE_ARN}\n  UserName: u\n  Groups: [system:nodes]\n");
        let parsed = roles(&input);
        assert_eq!(parsed[0].rolearn, NODE_ARN, "{key}");
        assert_eq!(parsed[0].username.as_deref(), Some("u"), "{key}");
        assert_eq!(parsed[0].groups, ["system:nodes"], "{key}");
    }
    let (users, problems) = parse_map_users("- userARN: arn:aws:iam::1:user/ops\n");
    assert!(problems.is_empty());
    assert_eq!(users[0].userarn, "arn:aws:iam::1:user/ops");
}

#[test]
fn empty_blank_null_and_empty_quotes_are_no_list_at_all() {
    for input in ["", "   \n", "null", "~", "[]", "``", "\"\"", "  \"\"  "] {
        let (roles, problems) = parse_map_roles(input);
        assert!(roles.is_empty() && problems.is_empty(), "{input:?}");
        let (users, problems) = parse_map_users(input);
        assert!(users.is_empty() && problems.is_empty(), "{input:?}");
    }
}

#[test]
fn invalid_yaml_keeps_no_mapping_and_reports_its_position() {
    let (roles, problems) = parse_map_roles("- rolearn: a\n  groups: [system:nodes\n");
    assert!(roles.is_empty());
    assert_eq!(problems.len(), 1);
    let problem = &problems[0];
    assert_eq!((problem.key, problem.entry), (MAP_ROLES, None));
    assert!(
        problem.line.is_some() && problem.column.is_some(),
        "{problem:?}"
    );
    assert!(
        problem.to_string().starts_with("mapRoles line "),
        "{problem}"
    );
}

#[test]
fn a_mapping_or_scalar_instead_of_a_list_keeps_no_mapping() {
    for input in [format!("rolearn: {NODE_ARN}"), "42".to_owned()] {
        let (roles, problems) = parse_map_roles(&input);
        assert!(roles.is_empty(), "{input}");
        assert!(problems[0].message.contains("not a list"), "{problems:?}");
    }
}

#[test]
fn a_type_error_in_one_field_keeps_the_rest_of_that_entry_and_every_other_entry() {
    // The authenticator's fixture shape: groups as a string in one entry.
    let input = format!(
        "- rolearn: arn:aws:iam::111122223333:role/admins\n  username: admin\n  groups: \
         system:masters\n{NODE_ENTRY}"
    );
    let (parsed, problems) = parse_map_roles(&input);
    assert_eq!(parsed.len(), 2, "both entries are kept");
    assert_eq!(parsed[0].username.as_deref(), Some("admin"));
    assert!(
        parsed[0].groups.is_empty(),
        "the wrongly typed field alone is lost"
    );
    assert_eq!(parsed[1].groups, ["system:bootstrappers", "system:nodes"]);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].entry, Some(1));
    assert!(
        problems[0].message.contains("groups is a string"),
        "{problems:?}"
    );
}

#[test]
fn wrongly_typed_values_are_named_and_skipped() {
    let (parsed, problems) = parse_map_roles(&format!(
        "- rolearn: {NODE_ARN}\n  username: 42\n  groups: [system:nodes, 7]\n"
    ));
    assert_eq!(parsed[0].username, None);
    assert_eq!(parsed[0].groups, ["system:nodes", ""]);
    // In the order Go decodes the keys: the bytes' order its json.Marshal writes them in.
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "groups holds a number, not a string",
            "username is a number, not a string"
        ]
    );
}

#[test]
fn entries_that_are_not_mappings_are_problems_and_null_entries_are_skipped() {
    let input = format!("- just a string\n- null\n- [a, list]\n{NODE_ENTRY}");
    let (parsed, problems) = parse_map_roles(&input);
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].entry, 4);
    let entries: Vec<Option<usize>> = problems.iter().map(|p| p.entry).collect();
    assert_eq!(entries, [Some(1), Some(3)]);
}

#[test]
fn the_last_entry_for_one_arn_is_in_force_compared_lower_cased() {
    let input = format!(
        "{NODE_ENTRY}- rolearn: {}\n  username: someone-else\n  groups: [system:masters]\n",
        NODE_ARN
            .to_uppercase()
            .replace("ARN:AWS:IAM", "arn:aws:iam")
    );
    let auth = parse(&AwsAuthData::new(Some(input), None));
    let in_force = auth.role_in_force(NODE_ARN).expect("an entry");
    assert_eq!(in_force.entry, 2);
    assert_eq!(in_force.username.as_deref(), Some("someone-else"));
    assert!(
        auth.role_in_force("arn:aws:iam::111122223333:role/other")
            .is_none()
    );
}

#[test]
fn a_repeated_key_keeps_its_last_value() {
    let input = format!(
        "- rolearn: arn:aws:iam::111122223333:role/first\n  rolearn: {NODE_ARN}\n  \
         roleArn: {NODE_ARN}\n  groups: [system:nodes]\n"
    );
    assert_eq!(roles(&input)[0].rolearn, NODE_ARN);
}

#[test]
fn map_roles_and_map_users_are_parsed_independently() {
    let auth = parse(&AwsAuthData::new(
        Some(NODE_ENTRY.into()),
        Some("- userarn: [\n".into()),
    ));
    assert_eq!(
        auth.map_roles.len(),
        1,
        "a broken mapUsers keeps every role"
    );
    assert!(auth.map_roles_unreadable().is_none());
    assert_eq!(auth.problems.len(), 1);
    assert_eq!(auth.problems[0].key, MAP_USERS);

    let auth = parse(&AwsAuthData::new(
        Some("- rolearn: [\n".into()),
        Some("- userarn: arn:aws:iam::1:user/ops\n  groups: [system:masters]\n".into()),
    ));
    assert_eq!(
        auth.map_users.len(),
        1,
        "a broken mapRoles keeps every user"
    );
    assert!(auth.map_roles_unreadable().is_some());
}

#[test]
fn entries_without_an_arn_map_nothing_but_sso_entries_are_expected() {
    let (parsed, problems) = parse_map_roles("- username: x\n");
    assert!(parsed.is_empty());
    assert_eq!(problems[0].message, "has no rolearn, so it maps nothing");
    let sso = "- sso: {permissionSetName: Admin, accountID: '111122223333'}\n  username: a\n";
    assert_eq!(roles(sso), vec![]);
}

#[test]
fn unknown_fields_are_ignored_like_the_authenticator_does() {
    assert_eq!(
        roles("- rolearn: arn:aws:iam::1:role/x\n  extra: 1\n").len(),
        1
    );
}

#[test]
fn unicode_huge_and_hostile_inputs_are_problems_or_values_never_panics() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let laughs = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
    let unicode = "- rolearn: \"arn:aws:iam::111122223333:role/ñødé-✓\"\n  groups: [\"système\"]\n";
    let huge = "x".repeat(MAX_INPUT_BYTES + 1);
    let many = NODE_ENTRY.repeat(5_000);
    for input in [
        deep.as_str(),
        laughs,
        unicode,
        huge.as_str(),
        "\u{feff}- a",
        "- !!binary x",
        "- !custom {rolearn: x}",
        "\t- x",
        "- {? [a, b] : c}",
    ] {
        let _ = parse_map_roles(input);
        let _ = parse_map_users(input);
    }
    assert_eq!(roles(unicode)[0].groups, ["système"]);
    assert_eq!(roles(&many).len(), 5_000);
    let (_, problems) = parse_map_roles(&huge);
    assert!(problems[0].message.contains("more than a ConfigMap"));
}
