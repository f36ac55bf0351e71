//! The macros that turn the one vocabulary table (`vocabulary/table/`, joined by the crate's build script) into the closed
//! `ConditionType`, `Reason` and `Warning` enums with their names, columns, texts and docs.
//! Pure, no IO.

/// The whole table: the shared reasons, then one entry per condition with its printer column,
/// where its facts come from, its reasons, its warnings, what its check cannot see, the reasons it no longer sets and what the lab
/// proves of its False reasons. It
/// flattens the entries into the three lists below, so each enum keeps the table's order.
macro_rules! vocabulary {
    (
        shared_reasons {
            $($shared:ident => $shared_status:ident, $shared_meaning:literal, $shared_remediation:literal;)+
        }
        $(
            $(#[doc = $doc:literal])*
            $condition:ident {
                column: $column:literal,
                facts_from {
                    cluster: $cluster_facts:literal,
                    aws: $aws_facts:literal,
                }
                reasons {
                    $($reason:ident => $status:ident, $meaning:literal, $remediation:literal;)+
                }
                $(warnings {
                    $($warning:ident => $warning_meaning:literal, $warning_remediation:literal;)+
                })?
                $(cannot_see: $cannot_see:literal,)?
                $(retired {
                    $($retired:ident => $retired_note:literal;)+
                })?
                $(lab {
                    $($lab_reason:ident => $lab:expr;)+
                })?
                $(oracle {
                    $($oracle_reason:ident => $oracle:expr;)+
                })?
            }
        )+
    ) => {
        condition_types! {
            $($(#[doc = $doc])* $condition, $column, $cluster_facts, $aws_facts,
                optional_text!($($cannot_see)?),
                [$($((stringify!($retired), $retired_note),)+)?];)+
        }
        reasons! {
            $($shared => $crate::conditions::ReasonScope::AnySubCondition, $shared_status,
                $shared_meaning, $shared_remediation;)+
            $($($reason => $crate::conditions::ReasonScope::Only(ConditionType::$condition), $status,
                $meaning, $remediation;)+)+
        }
        warnings! {
            $($($($warning => $condition, $warning_meaning, $warning_remediation;)+)?)+
        }
        impl Reason {
            /// What the lab says of this reason, when its condition's entry has a word on it
            /// (every reason that can be False has: a test holds the table to it).
            pub fn lab(self) -> Option<$crate::vocabulary::Lab> {
                match self {
                    $($($(Reason::$lab_reason => Some($lab),)+)?)+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// What the oracle says of this reason, when it models Karpenter's scheduling (its
            /// condition's `oracle` entry names it).
            pub fn oracle(self) -> Option<$crate::vocabulary::Oracle> {
                match self {
                    $($($(Reason::$oracle_reason => Some($oracle),)+)?)+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// The condition whose `lab` entry names this reason, for the test that holds each
            /// entry to its own condition's reasons.
            #[cfg(test)]
            fn lab_entry_of(self) -> Option<ConditionType> {
                match self {
                    $($($(Reason::$lab_reason => Some(ConditionType::$condition),)+)?)+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

/// `Some(text)` when the table gives the text, `None` when it leaves it out.
macro_rules! optional_text {
    () => {
        None
    };
    ($text:literal) => {
        Some($text)
    };
}

macro_rules! condition_types {
    ($($(#[doc = $doc:literal])* $name:ident, $column:literal, $cluster_facts:literal, $aws_facts:literal, $cannot_see:expr, $retired:expr;)+) => {
        /// The condition types of a KarpenterHealth, all of positive polarity: `True` is healthy.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub enum ConditionType { $($(#[doc = $doc])* $name,)+ }

        impl ConditionType {
            /// Every type, sub-conditions first and the summary `Ready` last.
            pub const ALL: &'static [ConditionType] = &[$(ConditionType::$name,)+];

            pub fn as_str(self) -> &'static str {
                match self { $(ConditionType::$name => stringify!($name),)+ }
            }

            /// One sentence on what `True` means, for docs and `kubectl explain`-style help.
            pub fn meaning(self) -> &'static str {
                match self { $(ConditionType::$name => concat!($($doc),+).trim_ascii(),)+ }
            }

            /// The short header used in printer columns.
            pub fn column(self) -> &'static str {
                match self { $(ConditionType::$name => $column,)+ }
            }

            /// What the check reads from the cluster (kube-facts), for the docs.
            pub fn cluster_facts(self) -> &'static str {
                match self { $(ConditionType::$name => $cluster_facts,)+ }
            }

            /// What the check reads from AWS (the aws adapter), for the docs; `—` for none.
            pub fn aws_facts(self) -> &'static str {
                match self { $(ConditionType::$name => $aws_facts,)+ }
            }

            /// What the check cannot see from where the operator stands: never a reason to say
            /// `False`, and named in the docs so a `True` is read for what it is.
            pub fn cannot_see(self) -> Option<&'static str> {
                match self { $(ConditionType::$name => $cannot_see,)+ }
            }

            /// Reasons earlier releases set on this condition and this one no longer does, each
            /// with what replaced it: an alert raised by a leader still running one during an
            /// upgrade links to its anchor in the docs.
            pub fn retired_reasons(self) -> &'static [(&'static str, &'static str)] {
                match self { $(ConditionType::$name => &$retired,)+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $(stringify!($name) => Some(ConditionType::$name),)+ _ => None }
            }
        }
    };
}

macro_rules! reasons {
    ($($name:ident => $scope:expr, $status:ident, $meaning:literal, $remediation:literal;)+) => {
        /// The closed list of condition reasons. The wire form is the variant name, which matches
        /// the `metav1.Condition` reason pattern and is stable: alerts route on it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub enum Reason { $($name,)+ }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$name,)+];

            pub fn as_str(self) -> &'static str {
                match self { $(Reason::$name => stringify!($name),)+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $(stringify!($name) => Some(Reason::$name),)+ _ => None }
            }

            pub fn meta(self) -> $crate::conditions::ReasonMeta {
                match self {
                    $(Reason::$name => $crate::conditions::ReasonMeta {
                        scope: $scope,
                        status: $crate::conditions::ConditionStatus::$status,
                        meaning: $meaning,
                        remediation: $remediation,
                    },)+
                }
            }
        }
    };
}

macro_rules! warnings {
    ($($name:ident => $condition:ident, $meaning:literal, $remediation:literal;)+) => {
        /// A warning finding's code (its `reason` field). Warnings never change a condition.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Warning { $($name,)+ }

        impl Warning {
            pub const ALL: &'static [Warning] = &[$(Warning::$name,)+];

            pub fn as_str(self) -> &'static str {
                match self { $(Warning::$name => stringify!($name),)+ }
            }

            /// The condition whose check reports it.
            pub fn condition(self) -> ConditionType {
                match self { $(Warning::$name => ConditionType::$condition,)+ }
            }

            pub fn meaning(self) -> &'static str {
                match self { $(Warning::$name => $meaning,)+ }
            }

            pub fn remediation(self) -> &'static str {
                match self { $(Warning::$name => $remediation,)+ }
            }
        }
    };
}
