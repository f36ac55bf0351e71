//! The macros that turn the condition and reason tables of `conditions.rs` into the closed
//! `ConditionType` and `Reason` enums with their names, columns and docs. Pure, no IO.

macro_rules! condition_types {
    ($($(#[doc = $doc:literal])* $name:ident, $column:literal;)+) => {
        /// The condition types of a KarpenterHealth, all of positive polarity: `True` is healthy.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
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
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum Reason { $($name,)+ }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$name,)+];

            pub fn as_str(self) -> &'static str {
                match self { $(Reason::$name => stringify!($name),)+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $(stringify!($name) => Some(Reason::$name),)+ _ => None }
            }

            pub fn meta(self) -> ReasonMeta {
                match self {
                    $(Reason::$name => ReasonMeta {
                        scope: $scope,
                        status: ConditionStatus::$status,
                        meaning: $meaning,
                        remediation: $remediation,
                    },)+
                }
            }
        }
    };
}
