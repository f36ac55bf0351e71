//! Parses the `mapRoles` and `mapUsers` strings of `kube-system/aws-auth` into typed entries.
//! Pure: no IO; malformed input of any shape or size is an [`AwsAuthError`] with its position,
//! never a panic.
//!
//! The types are as strict as the aws-iam-authenticator's Go structs (`groups` is a list of
//! strings; a bare string there is an error), and unknown fields are ignored, as Go's
//! `yaml.Unmarshal` does.

use crate::facts::AwsAuthData;
use serde::Deserialize;
use std::fmt;

/// A ConfigMap holds at most 1 MiB; anything much larger is not a real aws-auth and parsing it
/// would only cost time.
pub const MAX_INPUT_BYTES: usize = 2 * 1024 * 1024;

/// One `mapRoles` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMapping {
    pub rolearn: String,
    pub username: Option<String>,
    pub groups: Vec<String>,
}

/// One `mapUsers` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserMapping {
    pub userarn: String,
    pub username: Option<String>,
    pub groups: Vec<String>,
}

/// Both lists of a parsed aws-auth.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsAuth {
    pub map_roles: Vec<RoleMapping>,
    pub map_users: Vec<UserMapping>,
}

/// Why aws-auth could not be parsed, with the key and position (1-based) where known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsAuthError {
    /// `mapRoles` or `mapUsers`.
    pub key: &'static str,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for AwsAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                write!(
                    f,
                    "{} line {line} column {column}: {}",
                    self.key, self.message
                )
            }
            _ => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for AwsAuthError {}

#[derive(Deserialize)]
struct RawRole {
    #[serde(default)]
    rolearn: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    groups: Option<Vec<String>>,
    /// IAM Identity Center entries carry `sso` instead of `rolearn`; they never map a node role.
    #[serde(default)]
    sso: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
struct RawUser {
    #[serde(default)]
    userarn: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    groups: Option<Vec<String>>,
}

/// Parses both keys; the first error wins, `mapRoles` first.
pub fn parse(data: &AwsAuthData) -> Result<AwsAuth, AwsAuthError> {
    Ok(AwsAuth {
        map_roles: parse_map_roles(data.map_roles.as_deref().unwrap_or_default())?,
        map_users: parse_map_users(data.map_users.as_deref().unwrap_or_default())?,
    })
}

/// Parses a `mapRoles` string. Empty or `null` is an empty list, as for the authenticator.
pub fn parse_map_roles(input: &str) -> Result<Vec<RoleMapping>, AwsAuthError> {
    const KEY: &str = "mapRoles";
    let raw: Vec<RawRole> = parse_list(KEY, input)?;
    let mut out = Vec::with_capacity(raw.len());
    for (i, entry) in raw.into_iter().enumerate() {
        match entry.rolearn {
            Some(rolearn) if !rolearn.trim().is_empty() => out.push(RoleMapping {
                rolearn: rolearn.trim().to_owned(),
                username: entry.username,
                groups: entry.groups.unwrap_or_default(),
            }),
            _ if entry.sso.is_some() => {}
            _ => return Err(entry_error(KEY, i, "has no rolearn")),
        }
    }
    Ok(out)
}

/// Parses a `mapUsers` string. Empty or `null` is an empty list.
pub fn parse_map_users(input: &str) -> Result<Vec<UserMapping>, AwsAuthError> {
    const KEY: &str = "mapUsers";
    let raw: Vec<RawUser> = parse_list(KEY, input)?;
    let mut out = Vec::with_capacity(raw.len());
    for (i, entry) in raw.into_iter().enumerate() {
        match entry.userarn {
            Some(userarn) if !userarn.trim().is_empty() => out.push(UserMapping {
                userarn: userarn.trim().to_owned(),
                username: entry.username,
                groups: entry.groups.unwrap_or_default(),
            }),
            _ => return Err(entry_error(KEY, i, "has no userarn")),
        }
    }
    Ok(out)
}

fn parse_list<T: for<'de> Deserialize<'de>>(
    key: &'static str,
    input: &str,
) -> Result<Vec<T>, AwsAuthError> {
    if input.len() > MAX_INPUT_BYTES {
        return Err(AwsAuthError {
            key,
            line: None,
            column: None,
            message: format!(
                "{} bytes, more than a ConfigMap can hold ({MAX_INPUT_BYTES} accepted)",
                input.len()
            ),
        });
    }
    if input.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_yaml::from_str::<Option<Vec<T>>>(input) {
        Ok(list) => Ok(list.unwrap_or_default()),
        Err(err) => {
            let location = err.location();
            let mut message = err.to_string();
            // The YAML library appends the position to its message; it is kept in fields instead.
            if let Some(at) = message.rfind(" at line ") {
                message.truncate(at);
            }
            Err(AwsAuthError {
                key,
                line: location.as_ref().map(|l| l.line()),
                column: location.as_ref().map(|l| l.column()),
                message: crate::clip(&message, 512).into_owned(),
            })
        }
    }
}

fn entry_error(key: &'static str, index: usize, what: &str) -> AwsAuthError {
    AwsAuthError {
        key,
        line: None,
        column: None,
        message: format!("entry {} {what}", index + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE_ENTRY: &str = "- rolearn: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo
  username: system:node:{{EC2PrivateDNSName}}
  groups:
    - system:bootstrappers
    - system:nodes
";

    #[test]
    fn a_well_formed_node_entry_parses() {
        let roles = parse_map_roles(NODE_ENTRY).unwrap();
        assert_eq!(
            roles,
            vec![RoleMapping {
                rolearn: "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo".into(),
                username: Some("system:node:{{EC2PrivateDNSName}}".into()),
                groups: vec!["system:bootstrappers".into(), "system:nodes".into()],
            }]
        );
    }

    #[test]
    fn empty_blank_and_null_inputs_are_empty_lists() {
        for input in ["", "   \n", "null", "~", "[]"] {
            assert_eq!(parse_map_roles(input).unwrap(), vec![], "{input:?}");
            assert_eq!(parse_map_users(input).unwrap(), vec![], "{input:?}");
        }
    }

    #[test]
    fn invalid_yaml_reports_line_and_column() {
        let err = parse_map_roles("- rolearn: a\n  groups: [system:nodes\n").unwrap_err();
        assert_eq!(err.key, "mapRoles");
        assert!(err.line.is_some() && err.column.is_some(), "{err:?}");
        assert!(err.to_string().starts_with("mapRoles line "), "{err}");
    }

    #[test]
    fn groups_given_as_a_string_is_a_type_error_with_position() {
        let err = parse_map_roles(
            "- rolearn: arn:aws:iam::111122223333:role/x\n  groups: system:nodes\n",
        )
        .unwrap_err();
        assert_eq!(err.line, Some(2), "{err:?}");
        assert!(err.message.contains("invalid type"), "{err}");
    }

    #[test]
    fn a_mapping_instead_of_a_list_is_an_error() {
        assert!(parse_map_roles("rolearn: arn:aws:iam::111122223333:role/x").is_err());
        assert!(parse_map_roles("42").is_err());
    }

    #[test]
    fn an_entry_without_rolearn_is_an_error_but_sso_entries_are_skipped() {
        let err = parse_map_roles("- username: x\n").unwrap_err();
        assert_eq!(err.message, "entry 1 has no rolearn");
        let sso = "- sso: {permissionSetName: Admin, accountID: '111122223333'}\n  username: a\n";
        assert_eq!(parse_map_roles(sso).unwrap(), vec![]);
    }

    #[test]
    fn unknown_fields_are_ignored_like_the_authenticator_does() {
        let roles = parse_map_roles("- rolearn: arn:aws:iam::1:role/x\n  extra: 1\n").unwrap();
        assert_eq!(roles.len(), 1);
    }

    #[test]
    fn unicode_huge_and_hostile_inputs_are_errors_or_values_never_panics() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let laughs = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
        let unicode =
            "- rolearn: \"arn:aws:iam::111122223333:role/ñødé-✓\"\n  groups: [\"système\"]\n";
        let huge = "x".repeat(MAX_INPUT_BYTES + 1);
        let many = NODE_ENTRY.repeat(5_000);
        for input in [
            deep.as_str(),
            laughs,
            unicode,
            huge.as_str(),
            "\u{feff}- a",
            "- !!binary x",
            "\t- x",
        ] {
            let _ = parse_map_roles(input);
            let _ = parse_map_users(input);
        }
        assert_eq!(
            parse_map_roles(unicode).unwrap()[0].groups,
            vec!["système".to_owned()]
        );
        assert_eq!(parse_map_roles(&many).unwrap().len(), 5_000);
        assert!(
            parse_map_roles(&huge)
                .unwrap_err()
                .message
                .contains("more than a ConfigMap")
        );
    }

    #[test]
    fn map_users_parse_and_a_bad_map_users_fails_the_whole_configmap() {
        let data = AwsAuthData {
            map_roles: Some(NODE_ENTRY.into()),
            map_users: Some(
                "- userarn: arn:aws:iam::111122223333:user/ops\n  groups: [system:masters]\n"
                    .into(),
            ),
        };
        assert_eq!(
            parse(&data).unwrap().map_users[0].groups,
            vec!["system:masters".to_owned()]
        );
        let bad = AwsAuthData {
            map_users: Some("- userarn: [".into()),
            ..data
        };
        assert_eq!(parse(&bad).unwrap_err().key, "mapUsers");
    }
}
