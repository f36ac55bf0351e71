//! Reads `kube-system/aws-auth` the way EKS's authenticator does
//! (kubernetes-sigs/aws-iam-authenticator `pkg/mapper/configmap/configmap.go` `ParseMap`), so a
//! ConfigMap that works for EKS never reads as broken here. Pure: no IO; input of any shape or size
//! yields entries and problems, never a panic.
//!
//! The authenticator's rules, each followed here:
//! - `mapRoles` and `mapUsers` are parsed independently; a problem in one keeps the other.
//! - Each is YAML turned into JSON and decoded by Go's `encoding/json`, which matches keys
//!   case-insensitively (`roleARN`, `RoleArn`), ignores unknown keys, and on a value of the wrong
//!   type skips that one field and keeps everything else ("Only saving data that was good").
//! - An empty value, or one of just ``` `` ```, `""` or `''`, is no list at all (`isSkippable`).
//! - YAML merge keys (`<<: *anchor`) are applied as the YAML library does (go-yaml v2, which
//!   `sigs.k8s.io/yaml` uses): in document order, so a key set after the merge wins over it and
//!   one set before loses; a merge of anything but mappings fails the whole value.
//! - The YAML becomes a JSON object whose keys Go's `json.Marshal` writes in byte order, and Go's
//!   decoder matches them case-insensitively, the later winning: of `UserName` and `username`,
//!   `username` is the one kept.
//! - An entry is kept only if it passes `Validate` (`pkg/config/mapper.go`): a `rolearn`, or an
//!   `sso` mapping, but not both; ARNs are compared as written, spaces included.
//! - Mappings are stored by lower-cased ARN, so of several entries for one ARN the last is the one
//!   in force.
//! - A value that is not YAML, or not a list, yields no mappings at all.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A ConfigMap holds at most 1 MiB; anything much larger is not a real aws-auth and parsing it
/// would only cost time.
pub const MAX_INPUT_BYTES: usize = 2 * 1024 * 1024;

/// One `mapRoles` entry, as the authenticator keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMapping {
    /// Position in `mapRoles`, from 1.
    pub entry: usize,
    pub rolearn: String,
    pub username: Option<String>,
    pub groups: Vec<String>,
}

/// One `mapUsers` entry, as the authenticator keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserMapping {
    /// Position in `mapUsers`, from 1.
    pub entry: usize,
    pub userarn: String,
    pub username: Option<String>,
    pub groups: Vec<String>,
}

/// A `mapUsers` entry read as a role entry: the authenticator matches both by the same ARN and
/// maps them alike; `rolearn` holds the `userarn`.
impl From<&UserMapping> for RoleMapping {
    fn from(user: &UserMapping) -> Self {
        RoleMapping {
            entry: user.entry,
            rolearn: user.userarn.clone(),
            username: user.username.clone(),
            groups: user.groups.clone(),
        }
    }
}

/// What the authenticator would make of aws-auth: the entries it keeps and what it would log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsAuth {
    pub map_roles: Vec<RoleMapping>,
    pub map_users: Vec<UserMapping>,
    /// Every problem, in `mapRoles`, then `mapUsers` order.
    pub problems: Vec<AwsAuthError>,
}

impl AwsAuth {
    /// Whether `mapRoles` as a whole could not be read (not YAML, not a list, too large): then
    /// the authenticator keeps no role mapping at all.
    pub fn map_roles_unreadable(&self) -> Option<&AwsAuthError> {
        self.problems
            .iter()
            .find(|p| p.key == MAP_ROLES && p.entry.is_none())
    }

    /// The `mapRoles` entry the authenticator uses for `arn`: the last whose `rolearn` equals it,
    /// compared lower-cased.
    pub fn role_in_force(&self, arn: &str) -> Option<&RoleMapping> {
        self.map_roles
            .iter()
            .rev()
            .find(|m| m.rolearn.to_lowercase() == arn.to_lowercase())
    }

    /// The `mapUsers` entries the authenticator may use for `arn` when no `mapRoles` entry maps
    /// it (its `Map` looks roles up first, then users, by the same canonical ARN). Users are
    /// stored by their `userarn` as written (`UserMapping.Key` is not lower-cased): the last entry
    /// of each spelling, and every spelling equal to `arn` but for case matches, the one used
    /// being whichever Go's map iteration meets first. In entry order.
    pub fn users_in_force(&self, arn: &str) -> Vec<&UserMapping> {
        let mut last: Vec<&UserMapping> = Vec::new();
        for user in self
            .map_users
            .iter()
            .filter(|m| m.userarn.eq_ignore_ascii_case(arn))
        {
            last.retain(|u| u.userarn != user.userarn);
            last.push(user);
        }
        last.sort_by_key(|u| u.entry);
        last
    }

    /// The problems of one `mapRoles` entry.
    pub fn problems_of_role_entry(&self, entry: usize) -> impl Iterator<Item = &AwsAuthError> {
        self.problems_of_entry(MAP_ROLES, entry)
    }

    /// The problems of entry `entry` of `key` (`mapRoles` or `mapUsers`).
    pub fn problems_of_entry(
        &self,
        key: &'static str,
        entry: usize,
    ) -> impl Iterator<Item = &AwsAuthError> {
        self.problems
            .iter()
            .filter(move |p| p.key == key && p.entry == Some(entry))
    }
}

pub const MAP_ROLES: &str = "mapRoles";
pub const MAP_USERS: &str = "mapUsers";

/// A problem the authenticator would log, with the key, the entry (from 1) and the position
/// (from 1) where known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsAuthError {
    /// `mapRoles` or `mapUsers`.
    pub key: &'static str,
    /// The entry it concerns; `None` when the whole value could not be read.
    pub entry: Option<usize>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for AwsAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(entry) = self.entry {
            write!(f, " entry {entry}")?;
        }
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, " line {line} column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for AwsAuthError {}

/// Parses `mapRoles` and `mapUsers` independently (an absent key reads as empty).
pub fn parse(map_roles: Option<&str>, map_users: Option<&str>) -> AwsAuth {
    let (map_roles, mut problems) = parse_map_roles(map_roles.unwrap_or_default());
    let (map_users, user_problems) = parse_map_users(map_users.unwrap_or_default());
    problems.extend(user_problems);
    AwsAuth {
        map_roles,
        map_users,
        problems,
    }
}

/// The fields of one entry after Go's decoding: the ARN under `arn_key`, `username`, `groups`.
struct Decoded {
    arn: Option<String>,
    username: Option<String>,
    groups: Vec<String>,
    sso: bool,
}

/// Parses a `mapRoles` string into the entries the authenticator keeps and its problems.
pub fn parse_map_roles(input: &str) -> (Vec<RoleMapping>, Vec<AwsAuthError>) {
    let (decoded, mut problems) = parse_entries(MAP_ROLES, "rolearn", input);
    let mut roles = Vec::with_capacity(decoded.len());
    for (entry, fields) in decoded {
        match fields.arn {
            // `Validate`: "only one of rolearn or SSO can be supplied"; the entry is dropped.
            Some(rolearn) if !rolearn.is_empty() && fields.sso => problems.push(entry_problem(
                MAP_ROLES,
                entry,
                format!(
                    "has both rolearn {} and sso, which the authenticator refuses, so it maps nothing",
                    crate::clip(&rolearn, 256)
                ),
            )),
            Some(rolearn) if !rolearn.trim().is_empty() => {
                spaced_arn_problem(MAP_ROLES, entry, "rolearn", &rolearn, &mut problems);
                roles.push(RoleMapping {
                    entry,
                    rolearn,
                    username: fields.username,
                    groups: fields.groups,
                });
            }
            // IAM Identity Center entries carry `sso` instead of `rolearn`; they map no node.
            _ if fields.sso => {}
            _ => problems.push(entry_problem(
                MAP_ROLES,
                entry,
                "has no rolearn, so it maps nothing",
            )),
        }
    }
    (roles, problems)
}

/// Parses a `mapUsers` string into the entries the authenticator keeps and its problems.
pub fn parse_map_users(input: &str) -> (Vec<UserMapping>, Vec<AwsAuthError>) {
    let (decoded, mut problems) = parse_entries(MAP_USERS, "userarn", input);
    let mut users = Vec::with_capacity(decoded.len());
    for (entry, fields) in decoded {
        match fields.arn {
            Some(userarn) if !userarn.trim().is_empty() => {
                spaced_arn_problem(MAP_USERS, entry, "userarn", &userarn, &mut problems);
                users.push(UserMapping {
                    entry,
                    userarn,
                    username: fields.username,
                    groups: fields.groups,
                });
            }
            _ => problems.push(entry_problem(
                MAP_USERS,
                entry,
                "has no userarn, so it maps nothing",
            )),
        }
    }
    (users, problems)
}

/// An ARN written with spaces around it (a quoted YAML string keeps them): the authenticator
/// compares it as written (`strings.EqualFold`), so it matches no identity.
fn spaced_arn_problem(
    key: &'static str,
    entry: usize,
    field: &str,
    arn: &str,
    problems: &mut Vec<AwsAuthError>,
) {
    if arn.trim() != arn {
        problems.push(entry_problem(
            key,
            entry,
            format!(
                "{field} {:?} has white space around it, which the authenticator keeps, so it matches no identity",
                crate::clip(arn, 256)
            ),
        ));
    }
}

fn entry_problem(key: &'static str, entry: usize, message: impl Into<String>) -> AwsAuthError {
    AwsAuthError {
        key,
        entry: Some(entry),
        line: None,
        column: None,
        message: message.into(),
    }
}

fn whole_problem(key: &'static str, message: impl Into<String>) -> AwsAuthError {
    AwsAuthError {
        key,
        entry: None,
        line: None,
        column: None,
        message: message.into(),
    }
}

/// `isSkippable`: nothing, or only empty quotes.
fn is_skippable(input: &str) -> bool {
    matches!(input.trim(), "" | "``" | "\"\"" | "''")
}

/// Go's `encoding/json` key matching: an exact match or one equal but for case.
fn key_is(key: &str, field: &str) -> bool {
    key == field || key.to_lowercase() == field
}

/// Decodes a list value into entries (numbered from 1) the way Go would, with its problems.
fn parse_entries(
    key: &'static str,
    arn_key: &str,
    input: &str,
) -> (Vec<(usize, Decoded)>, Vec<AwsAuthError>) {
    if input.len() > MAX_INPUT_BYTES {
        let message = format!(
            "{} bytes, more than a ConfigMap can hold ({MAX_INPUT_BYTES} accepted)",
            input.len()
        );
        return (Vec::new(), vec![whole_problem(key, message)]);
    }
    if is_skippable(input) {
        return (Vec::new(), Vec::new());
    }
    let items = match serde_yaml::from_str::<Loose>(input) {
        Ok(Loose::Null) => return (Vec::new(), Vec::new()),
        Ok(Loose::Seq(items)) => items,
        Ok(other) => {
            let message = format!("is {}, not a list, so it maps nothing", other.kind());
            return (Vec::new(), vec![whole_problem(key, message)]);
        }
        Err(err) => return (Vec::new(), vec![yaml_problem(key, &err)]),
    };
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let entry = index + 1;
        let mut problem = |message: String| problems.push(entry_problem(key, entry, message));
        let fields = match item {
            Loose::Map(fields) => fields,
            // Go decodes `null` into an empty entry without complaint.
            Loose::Null => continue,
            other => {
                problem(format!("is {}, not a mapping", other.kind()));
                continue;
            }
        };
        let mut decoded = Decoded {
            arn: None,
            username: None,
            groups: Vec::new(),
            sso: false,
        };
        // In the byte order Go's `json.Marshal` writes the object's keys: of two keys for the same
        // field (they differ only in case), the later overwrites the earlier, as in Go.
        let mut fields = fields;
        fields.sort_by(|(a, _), (b, _)| a.cmp(b));
        for (name, value) in fields {
            if key_is(&name, arn_key) {
                string_field(&name, value, &mut decoded.arn, &mut problem);
            } else if key_is(&name, "username") {
                string_field(&name, value, &mut decoded.username, &mut problem);
            } else if key_is(&name, "groups") {
                match value {
                    Loose::Seq(groups) => {
                        decoded.groups = groups
                            .into_iter()
                            .map(|g| match g {
                                Loose::Str(s) => s,
                                // Go decodes a null item into "" without complaint.
                                Loose::Null => String::new(),
                                other => {
                                    problem(format!("{name} holds {}, not a string", other.kind()));
                                    String::new()
                                }
                            })
                            .collect();
                    }
                    Loose::Null => {}
                    other => problem(format!(
                        "{name} is {}, not a list, so the entry has no groups",
                        other.kind()
                    )),
                }
            } else if key_is(&name, "sso") {
                // Go's decoder allocates the SSO matcher before it finds a value of the wrong
                // type (an error it logs), so anything but null counts as an `sso`.
                match value {
                    Loose::Map(_) => decoded.sso = true,
                    Loose::Null => {}
                    other => {
                        decoded.sso = true;
                        problem(format!("{name} is {}, not a mapping", other.kind()));
                    }
                }
            }
        }
        out.push((entry, decoded));
    }
    (out, problems)
}

/// A string field: a string sets it, `null` leaves it, anything else is a problem that leaves it.
fn string_field(
    name: &str,
    value: Loose,
    field: &mut Option<String>,
    problem: &mut impl FnMut(String),
) {
    match value {
        Loose::Str(s) => *field = Some(s),
        Loose::Null => {}
        other => problem(format!("{name} is {}, not a string", other.kind())),
    }
}

fn yaml_problem(key: &'static str, err: &serde_yaml::Error) -> AwsAuthError {
    let location = err.location();
    let mut message = err.to_string();
    // The YAML library appends the position to its message; it is kept in fields instead.
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    AwsAuthError {
        key,
        entry: None,
        line: location.as_ref().map(|l| l.line()),
        column: location.as_ref().map(|l| l.column()),
        message: format!(
            "not YAML, so it maps nothing: {}",
            crate::clip(&message, 512)
        ),
    }
}

/// A YAML value as Go's YAML-to-JSON step sees it: scalars keep their JSON type, mapping keys
/// become strings, and a repeated key keeps its last value (serde's own types would refuse it).
#[derive(Clone, Debug, PartialEq)]
enum Loose {
    Null,
    Bool,
    Number,
    Str(String),
    Seq(Vec<Loose>),
    Map(Vec<(String, Loose)>),
}

impl Loose {
    fn kind(&self) -> &'static str {
        match self {
            Loose::Null => "null",
            Loose::Bool => "a boolean",
            Loose::Number => "a number",
            Loose::Str(_) => "a string",
            Loose::Seq(_) => "a list",
            Loose::Map(_) => "a mapping",
        }
    }

    /// The JSON object key Go's conversion makes of a mapping key.
    fn into_key(self) -> String {
        match self {
            Loose::Str(s) => s,
            Loose::Null => "null".into(),
            other => other.kind().into(),
        }
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor)
    }
}

struct LooseVisitor;

impl<'de> Visitor<'de> for LooseVisitor {
    type Value = Loose;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Loose, E> {
        Ok(Loose::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Loose, E> {
        Ok(Loose::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Loose, D::Error> {
        Loose::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Loose, E> {
        Ok(Loose::Bool)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Loose, E> {
        Ok(Loose::Number)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Loose, E> {
        Ok(Loose::Number)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Loose, E> {
        Ok(Loose::Number)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Loose, E> {
        Ok(Loose::Number)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Loose, E> {
        Ok(Loose::Number)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Loose, E> {
        Ok(Loose::Str(s.to_owned()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Loose, E> {
        Ok(Loose::Str(s))
    }
    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Loose, E> {
        Ok(Loose::Str(String::from_utf8_lossy(b).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Loose, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Loose>()? {
            items.push(item);
        }
        Ok(Loose::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Loose, A::Error> {
        let mut fields: Vec<(String, Loose)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<Loose, Loose>()? {
            let key = key.into_key();
            if key == "<<" {
                // YAML's merge key, as go-yaml v2 applies it (`decode.go` `merge`): in document
                // order, so the merged keys replace what the entry set before it and what it sets
                // after replaces them; of a list of mappings the earlier wins; anything else is
                // an error that fails the whole value.
                let mut sources = match value {
                    Loose::Map(m) => vec![m],
                    Loose::Seq(items) => items
                        .into_iter()
                        .map(|i| match i {
                            Loose::Map(m) => Ok(m),
                            _ => Err(de::Error::custom(
                                "map merge requires map or sequence of maps as the value",
                            )),
                        })
                        .collect::<Result<Vec<_>, A::Error>>()?,
                    _ => {
                        return Err(de::Error::custom(
                            "map merge requires map or sequence of maps as the value",
                        ));
                    }
                };
                sources.reverse();
                for (k, v) in sources.into_iter().flatten() {
                    fields.retain(|(f, _)| *f != k);
                    fields.push((k, v));
                }
                continue;
            }
            // A key of the entry's own replaces an earlier one, merged or not.
            fields.retain(|(k, _)| *k != key);
            fields.push((key, value));
        }
        Ok(Loose::Map(fields))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Loose, A::Error> {
        // A tagged value (`!!binary x`, `!custom y`): Go's conversion keeps the value; its type
        // rarely matters here, so the tag is dropped and the content read.
        let (_tag, variant) = data.variant::<de::IgnoredAny>()?;
        de::VariantAccess::newtype_variant::<Loose>(variant)
    }
}

#[cfg(test)]
mod tests;
