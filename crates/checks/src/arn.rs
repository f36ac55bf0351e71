//! Parses AWS ARNs, and IAM ARNs in detail (partition, account, resource type, path, name), and
//! tells valid IAM names. Pure string handling: no IO, never panics, whatever the input.

use std::fmt;

/// The longest ARN accepted; IAM documents 2048 characters as the limit for any ARN.
pub const MAX_ARN_LEN: usize = 2048;

/// A generic ARN: `arn:partition:service:region:account:resource`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arn {
    pub partition: String,
    pub service: String,
    pub region: String,
    pub account: String,
    pub resource: String,
}

/// An IAM ARN split into the parts the checks compare: `arn:aws:iam::111122223333:role/a/b/Name`
/// has resource type `role`, path `/a/b/` and name `Name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IamArn {
    pub partition: String,
    /// 12 digits, or `aws` for AWS-managed policies.
    pub account: String,
    /// `role`, `instance-profile`, `user`, `policy`, `group`, or `root` (which has no name).
    pub resource_type: String,
    /// `/` when the resource has no path, otherwise `/a/b/`.
    pub path: String,
    pub name: String,
}

/// Why a string is not a (usable) ARN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArnError {
    Empty,
    TooLong {
        len: usize,
    },
    NotAnArn,
    MissingParts {
        found: usize,
    },
    EmptyPartition,
    NotIam {
        service: String,
    },
    InvalidAccount {
        account: String,
    },
    EmptyResource,
    /// The resource starts with `/`: no `role`, `instance-profile`, ... before the name.
    MissingResourceType,
}

impl fmt::Display for ArnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("the ARN is empty"),
            Self::TooLong { len } => {
                write!(
                    f,
                    "the ARN is {len} characters long, over the {MAX_ARN_LEN} limit"
                )
            }
            Self::NotAnArn => f.write_str("it does not start with \"arn:\""),
            Self::MissingParts { found } => {
                write!(
                    f,
                    "an ARN has 6 colon-separated parts, this one has {found}"
                )
            }
            Self::EmptyPartition => f.write_str("the partition is empty"),
            Self::NotIam { service } => {
                write!(
                    f,
                    "the service is {:?}, not \"iam\"",
                    crate::clip(service, 64)
                )
            }
            Self::InvalidAccount { account } => write!(
                f,
                "the account {:?} is neither 12 digits nor \"aws\"",
                crate::clip(account, 64)
            ),
            Self::EmptyResource => f.write_str("the resource part is empty"),
            Self::MissingResourceType => f.write_str("the resource has no type before its '/'"),
        }
    }
}

impl std::error::Error for ArnError {}

/// Parses any ARN into its six parts.
pub fn parse(s: &str) -> Result<Arn, ArnError> {
    if s.is_empty() {
        return Err(ArnError::Empty);
    }
    if s.len() > MAX_ARN_LEN {
        return Err(ArnError::TooLong { len: s.len() });
    }
    let parts: Vec<&str> = s.splitn(6, ':').collect();
    if parts.first() != Some(&"arn") {
        return Err(ArnError::NotAnArn);
    }
    let [_, partition, service, region, account, resource] = parts[..] else {
        return Err(ArnError::MissingParts { found: parts.len() });
    };
    if partition.is_empty() {
        return Err(ArnError::EmptyPartition);
    }
    if resource.is_empty() {
        return Err(ArnError::EmptyResource);
    }
    Ok(Arn {
        partition: partition.to_owned(),
        service: service.to_owned(),
        region: region.to_owned(),
        account: account.to_owned(),
        resource: resource.to_owned(),
    })
}

/// Parses an IAM ARN (`arn:<partition>:iam::<account>:<type>/<path...>/<name>`).
pub fn parse_iam(s: &str) -> Result<IamArn, ArnError> {
    let arn = parse(s)?;
    if arn.service != "iam" {
        return Err(ArnError::NotIam {
            service: arn.service,
        });
    }
    let account_ok = arn.account == "aws"
        || (arn.account.len() == 12 && arn.account.bytes().all(|b| b.is_ascii_digit()));
    if !account_ok {
        return Err(ArnError::InvalidAccount {
            account: arn.account,
        });
    }
    if arn.resource.starts_with('/') {
        return Err(ArnError::MissingResourceType);
    }
    let (resource_type, path, name) = match arn.resource.split_once('/') {
        None => (arn.resource.clone(), "/".to_owned(), String::new()),
        Some((ty, rest)) => match rest.rsplit_once('/') {
            None => (ty.to_owned(), "/".to_owned(), rest.to_owned()),
            Some((path, name)) => (ty.to_owned(), format!("/{path}/"), name.to_owned()),
        },
    };
    Ok(IamArn {
        partition: arn.partition,
        account: arn.account,
        resource_type,
        path,
        name,
    })
}

impl IamArn {
    /// Whether the ARN carries an IAM path (the aws-iam-authenticator never matches those).
    pub fn has_path(&self) -> bool {
        self.path != "/"
    }

    /// The same ARN with the path removed: the form aws-auth needs.
    pub fn without_path(&self) -> String {
        format!(
            "arn:{}:iam::{}:{}/{}",
            self.partition, self.account, self.resource_type, self.name
        )
    }

    /// Whether both name the same principal when paths are ignored. IAM names are unique
    /// case-insensitively, and the authenticator lower-cases ARNs before matching.
    pub fn same_principal(&self, other: &IamArn) -> bool {
        self.partition == other.partition
            && self.account == other.account
            && self.resource_type == other.resource_type
            && self.name.eq_ignore_ascii_case(&other.name)
    }
}

impl fmt::Display for IamArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() && !self.has_path() {
            write!(
                f,
                "arn:{}:iam::{}:{}",
                self.partition, self.account, self.resource_type
            )
        } else {
            write!(
                f,
                "arn:{}:iam::{}:{}{}{}",
                self.partition, self.account, self.resource_type, self.path, self.name
            )
        }
    }
}

/// The name in an IAM reference that may be a bare name or an ARN (users put either in
/// `spec.role`): the ARN's last segment, or the string itself.
pub fn name_of(reference: &str) -> &str {
    if reference.starts_with("arn:") {
        reference.rsplit('/').next().unwrap_or(reference)
    } else {
        reference
    }
}

/// IAM's pattern for entity names, `^[\w+=,.@-]{1,max_len}$`. The length differs by entity:
/// 128 for instance profiles, 64 for roles.
pub fn is_valid_iam_name(name: &str, max_len: usize) -> bool {
    (1..=max_len).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iam_names_follow_the_pattern_up_to_the_given_length() {
        assert!(is_valid_iam_name("KarpenterNodeRole-demo_1+=,.@", 64));
        assert!(is_valid_iam_name(&"a".repeat(64), 64));
        assert!(!is_valid_iam_name(&"a".repeat(65), 64));
        assert!(!is_valid_iam_name("", 64));
        assert!(!is_valid_iam_name("path/name", 64));
    }

    #[test]
    fn a_role_arn_without_path_has_the_root_path() {
        let arn = parse_iam("arn:aws:iam::111122223333:role/KarpenterNodeRole-demo").unwrap();
        assert_eq!(arn.partition, "aws");
        assert_eq!(arn.account, "111122223333");
        assert_eq!(arn.resource_type, "role");
        assert_eq!(arn.path, "/");
        assert_eq!(arn.name, "KarpenterNodeRole-demo");
        assert!(!arn.has_path());
        assert_eq!(
            arn.to_string(),
            "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"
        );
    }

    #[test]
    fn a_role_arn_with_a_path_keeps_the_path_and_strips_it_on_request() {
        let arn = parse_iam("arn:aws-us-gov:iam::111122223333:role/team/dev/eks-admin").unwrap();
        assert_eq!(arn.path, "/team/dev/");
        assert_eq!(arn.name, "eks-admin");
        assert!(arn.has_path());
        assert_eq!(
            arn.without_path(),
            "arn:aws-us-gov:iam::111122223333:role/eks-admin"
        );
        assert_eq!(
            arn.to_string(),
            "arn:aws-us-gov:iam::111122223333:role/team/dev/eks-admin"
        );
    }

    #[test]
    fn instance_profile_and_managed_policy_arns_parse() {
        let p =
            parse_iam("arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile")
                .unwrap();
        assert_eq!(
            (p.resource_type.as_str(), p.name.as_str()),
            ("instance-profile", "KarpenterNodeInstanceProfile")
        );
        let m = parse_iam("arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy").unwrap();
        assert_eq!(m.account, "aws");
        assert_eq!(m.name, "AmazonEKSWorkerNodePolicy");
        let root = parse_iam("arn:aws:iam::111122223333:root").unwrap();
        assert_eq!(root.resource_type, "root");
        assert_eq!(root.to_string(), "arn:aws:iam::111122223333:root");
        let odd = parse_iam("arn:aws:iam::111122223333:role/a/").unwrap();
        assert_eq!((odd.path.as_str(), odd.name.as_str()), ("/a/", ""));
        assert_eq!(parse_iam(&odd.to_string()), Ok(odd));
    }

    #[test]
    fn strings_that_are_not_iam_arns_are_errors_not_panics() {
        for (input, want) in [
            ("", ArnError::Empty),
            ("KarpenterNodeRole", ArnError::NotAnArn),
            ("arn:aws:iam", ArnError::MissingParts { found: 3 }),
            ("arn::iam::111122223333:role/x", ArnError::EmptyPartition),
            (
                "arn:aws:s3:::bucket",
                ArnError::NotIam {
                    service: "s3".into(),
                },
            ),
            (
                "arn:aws:iam::12345:role/x",
                ArnError::InvalidAccount {
                    account: "12345".into(),
                },
            ),
            ("arn:aws:iam::111122223333:", ArnError::EmptyResource),
            // Found by the `arn` fuzz target: printed back, it was no longer an ARN.
            ("arn:a`ws:iam:n:aws:/", ArnError::MissingResourceType),
        ] {
            assert_eq!(parse_iam(input), Err(want), "{input:?}");
        }
        assert!(matches!(
            parse_iam(&"a".repeat(5000)),
            Err(ArnError::TooLong { .. })
        ));
        assert!(parse_iam("arn:aws:iam::١٢٣٤٥٦٧٨٩٠١٢:role/ü").is_err());
        assert_eq!(
            parse_iam("arn:aws:iam::111122223333:role/ü/ß")
                .unwrap()
                .name,
            "ß"
        );
    }

    #[test]
    fn same_principal_ignores_the_path() {
        let a = parse_iam("arn:aws:iam::111122223333:role/a/b/Node").unwrap();
        let b = parse_iam("arn:aws:iam::111122223333:role/Node").unwrap();
        let c = parse_iam("arn:aws:iam::111122223333:role/Other").unwrap();
        let d = parse_iam("arn:aws:iam::111122223333:role/node").unwrap();
        assert!(a.same_principal(&b));
        assert!(a.same_principal(&d));
        assert!(!a.same_principal(&c));
    }

    #[test]
    fn name_of_takes_the_last_segment_of_an_arn_only() {
        assert_eq!(
            name_of("arn:aws:iam::111122223333:role/x/NodeRole"),
            "NodeRole"
        );
        assert_eq!(name_of("NodeRole"), "NodeRole");
    }
}
