//! `RuleFormat`: which keys hold which kinds, and how their values read.

use sentinel_flow_core::RuleBook;

use super::{KeyValue, Values};
use crate::change::RuleChange;
use crate::error::{FileError, Problem};
use crate::load::parse_bytes;
use crate::options::LoadOptions;
use crate::parse::{RuleFile, parse};
use crate::render;

/// How rules are laid out in a store.
///
/// ```
/// use sentinel_flow_rules::source::{RuleFormat, SentinelKeys};
///
/// // Our YAML rule file, whole, under one key.
/// let yaml = RuleFormat::yaml("orders/rules.yaml");
/// // Sentinel's JSON, one key per kind, named as Sentinel's dashboard
/// // names them: `orders-flow-rules`, `orders-degrade-rules`, ...
/// let json = RuleFormat::sentinel_json(SentinelKeys::for_app("orders"));
/// assert_eq!(json.keys()[0], "orders-flow-rules");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleFormat {
    /// A whole rule file (every kind, `version`, `track_percentiles`) as
    /// YAML under one key. A missing key is refused like a missing file.
    Yaml {
        /// The key.
        key: String,
    },
    /// Sentinel's JSON arrays, one key per kind (the JSON the command API
    /// reads and writes). A missing key means no rules of its kind; a
    /// kind with no key configured has no rules.
    SentinelJson(SentinelKeys),
}

/// The key of each kind in Sentinel's JSON layout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentinelKeys {
    keys: [Option<String>; 5],
    /// The keys of kinds that are not built in, by kind: read for a kind
    /// an application registered.
    user: Vec<(String, String)>,
}

/// The kinds in the order of [`SentinelKeys`]' keys.
const KINDS: [&str; crate::change::KIND_COUNT] = crate::json::KINDS;

impl SentinelKeys {
    /// Sentinel's convention, as its dashboard's persistence samples name
    /// the keys: `${app}-flow-rules`, `${app}-degrade-rules`,
    /// `${app}-system-rules`, `${app}-authority-rules` and
    /// `${app}-param-rules` (hot parameters).
    pub fn for_app(app: &str) -> Self {
        SentinelKeys {
            keys: [
                Some(format!("{app}-flow-rules")),
                Some(format!("{app}-degrade-rules")),
                Some(format!("{app}-system-rules")),
                Some(format!("{app}-authority-rules")),
                Some(format!("{app}-param-rules")),
            ],
            user: Vec::new(),
        }
    }

    /// No key for any kind; add them with [`key`](Self::key).
    pub fn none() -> Self {
        SentinelKeys::default()
    }

    /// `kind` (`flow`, `degrade`, `system`, `authority`, `param_flow`, or
    /// a kind an application adds, registered on the watcher's
    /// [`LoadOptions::kind`]) is kept under `key`. A key of a kind that is
    /// neither built in nor registered is refused when the rules are read,
    /// with the kinds there are.
    pub fn key(mut self, kind: &str, key: impl Into<String>) -> Self {
        match KINDS.iter().position(|k| *k == kind) {
            Some(i) => self.keys[i] = Some(key.into()),
            None => match self.user.iter_mut().find(|(k, _)| k == kind) {
                Some((_, at)) => *at = key.into(),
                None => self.user.push((kind.to_owned(), key.into())),
            },
        }
        self
    }

    /// The key of `kind`, if one is set.
    pub fn key_of(&self, kind: &str) -> Option<&str> {
        match KINDS.iter().position(|k| *k == kind) {
            Some(i) => self.keys[i].as_deref(),
            None => self
                .user
                .iter()
                .find(|(k, _)| k == kind)
                .map(|(_, key)| key.as_str()),
        }
    }
}

impl RuleFormat {
    /// Our YAML under `key`.
    pub fn yaml(key: impl Into<String>) -> Self {
        RuleFormat::Yaml { key: key.into() }
    }

    /// Sentinel's JSON under `keys`.
    pub fn sentinel_json(keys: SentinelKeys) -> Self {
        RuleFormat::SentinelJson(keys)
    }

    /// Every key the format reads.
    pub fn keys(&self) -> Vec<String> {
        match self {
            RuleFormat::Yaml { key } => vec![key.clone()],
            RuleFormat::SentinelJson(keys) => {
                let user = keys.user.iter().map(|(_, key)| key);
                keys.keys.iter().flatten().chain(user).cloned().collect()
            }
        }
    }

    /// The rule set `values` hold, every problem told with its key and
    /// place; `source` names the store in errors.
    pub(crate) fn decode(
        &self,
        source: &str,
        values: &Values,
        options: &LoadOptions,
    ) -> Result<RuleFile, FileError> {
        match self {
            RuleFormat::Yaml { key } => {
                let name = key_name(source, key);
                match values.get(key) {
                    KeyValue::Present(bytes) => parse_bytes(bytes, &name, options),
                    KeyValue::Missing => Err(FileError::one(
                        &name,
                        None,
                        "the key does not exist; the rules in force are kept until it does",
                    )),
                    other => Err(FileError::one(&name, None, refused(other, options))),
                }
            }
            RuleFormat::SentinelJson(keys) => {
                let mut problems = Vec::new();
                let user_kinds = options.get_user_kinds();
                let mut file = RuleFile::new(None, RuleBook::default());
                // A registered kind with no key, or a missing key, has no
                // rules.
                file.user_kinds = user_kinds.iter().map(|kind| kind.empty()).collect();
                let built_in = KINDS.iter().zip(&keys.keys);
                let built_in = built_in.filter_map(|(kind, key)| Some((*kind, key.as_deref()?)));
                let user = keys.user.iter().map(|(k, key)| (k.as_str(), key.as_str()));
                for (kind, key) in built_in.chain(user) {
                    let text = match values.get(key) {
                        KeyValue::Missing => continue,
                        KeyValue::Present(bytes) => match std::str::from_utf8(bytes) {
                            Ok(text) => text,
                            Err(e) => {
                                problems.push(format!(
                                    "key {key}: the value is not UTF-8 (invalid byte at offset {})",
                                    e.valid_up_to()
                                ));
                                continue;
                            }
                        },
                        other => {
                            problems.push(format!("key {key}: {}", refused(other, options)));
                            continue;
                        }
                    };
                    match crate::json::decode_with(user_kinds, kind, text) {
                        Ok(change) => change.move_into_file(&mut file),
                        Err(lines) => {
                            problems.extend(lines.into_iter().map(|l| format!("key {key}: {l}")))
                        }
                    }
                }
                if problems.is_empty() {
                    Ok(file)
                } else {
                    let problems = problems.into_iter().map(|p| Problem::new(None, p));
                    Err(FileError::new(source, problems.collect()))
                }
            }
        }
    }

    /// The key to write and its new value for `change`, made from the
    /// values in force (`known`); `Err` lists every problem.
    pub(crate) fn encode(
        &self,
        source: &str,
        known: &Values,
        change: &RuleChange,
        options: &LoadOptions,
    ) -> Result<(String, Vec<u8>), Vec<String>> {
        match self {
            RuleFormat::Yaml { key } => {
                let name = key_name(source, key);
                let mut file = match known.get(key) {
                    KeyValue::Present(bytes) => {
                        parse_bytes(bytes, &name, options).map_err(|e| e.lines())?
                    }
                    KeyValue::Missing => RuleFile::new(None, RuleBook::default()),
                    other => return Err(vec![format!("{name}: {}", refused(other, options))]),
                };
                change.put_in(&mut file);
                let text = render::document(&file)?;
                // Read back as a load would: what is written must load.
                parse(&text, &name, options).map_err(|e| e.lines())?;
                Ok((key.clone(), text.into_bytes()))
            }
            RuleFormat::SentinelJson(keys) => {
                let Some(key) = keys.key_of(change.kind()) else {
                    return Err(vec![format!(
                        "{source}: no key is configured for {} rules",
                        change.kind()
                    )]);
                };
                Ok((key.to_owned(), crate::json::encode(change).into_bytes()))
            }
        }
    }
}

/// A key as named in errors: `{source} key {key}`, or the source's name
/// alone when the key is the source itself (a file: `{path}:3:7: ...`).
fn key_name(source: &str, key: &str) -> String {
    if key == source {
        source.to_owned()
    } else {
        format!("{source} key {key}")
    }
}

/// Why a value that is not plain bytes within the limit is refused.
fn refused(value: &KeyValue, options: &LoadOptions) -> String {
    match value {
        KeyValue::TooLarge(len) => format!(
            "the value is {len} bytes, over the limit of {} bytes; refused unread",
            options.get_max_size()
        ),
        KeyValue::Unreadable(why) => format!("cannot read the key: {why}"),
        KeyValue::Missing => "the key does not exist".to_owned(),
        KeyValue::Unsettled => "the value is being written".to_owned(),
        KeyValue::Present(_) => "the value is refused".to_owned(),
    }
}
