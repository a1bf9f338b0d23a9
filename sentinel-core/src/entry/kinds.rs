//! The two small enums every layer names: whether an entry is inbound or
//! outbound, and which check refused one.

use std::fmt;

/// Whether an entry is a request into this service or a call out of it.
/// System rules and the inbound total count only inbound entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// A request this service serves.
    Inbound,
    /// A call this service makes (the default, as in Sentinel).
    #[default]
    Outbound,
}

/// Makes [`BlockKind`] from the list of rule kinds (`crate::kinds`).
macro_rules! block_kinds {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// Which check refused an entry.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum BlockKind {
            $(#[doc = $doc] $variant,)*
            /// A user slot, with the kind it gave.
            Custom(&'static str),
        }

        impl BlockKind {
            /// A short lowercase name: the rule kind's (`flow`, `degrade`,
            /// `system`, `authority`, `param_flow`), or the custom kind.
            pub const fn as_str(&self) -> &'static str {
                match self {
                    $(BlockKind::$variant => $name,)*
                    BlockKind::Custom(kind) => kind,
                }
            }

            /// Sentinel's exception name for a block of this kind
            /// (`FlowException`, ...); a custom kind's name as given.
            pub const fn exception_name(&self) -> &'static str {
                match self {
                    $(BlockKind::$variant => $exception,)*
                    BlockKind::Custom(kind) => kind,
                }
            }

            /// The kind's place in the list of rule kinds, from 1 (the
            /// custom kinds after the last): its code in the block tally.
            pub(crate) const fn code(&self) -> usize {
                /// The kinds' places in the list.
                #[allow(dead_code)]
                enum Code {
                    $($variant,)*
                    Custom,
                }
                1 + match self {
                    $(BlockKind::$variant => Code::$variant as usize,)*
                    BlockKind::Custom(_) => Code::Custom as usize,
                }
            }
        }
    };
}
rule_kinds!(block_kinds);

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
