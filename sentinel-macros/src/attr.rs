//! Parsing the arguments of `#[sentinel_resource(...)]`.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Ident, LitInt, LitStr, Pat, Path, Token};

mod kw {
    syn::custom_keyword!(name);
    syn::custom_keyword!(entry_type);
    syn::custom_keyword!(batch_count);
    syn::custom_keyword!(args);
    syn::custom_keyword!(block_handler);
    syn::custom_keyword!(fallback);
    syn::custom_keyword!(exceptions_to_ignore);
    syn::custom_keyword!(sentinel);
    syn::custom_keyword!(inbound);
    syn::custom_keyword!(outbound);
}

const EXPECTED: &str = "expected `\"name\"` or one of the arguments `name`, `entry_type`, \
    `batch_count`, `args`, `block_handler`, `fallback`, `exceptions_to_ignore`, `sentinel`, `crate`";

/// A path given as an argument (`block_handler = path`), with the span of
/// the whole `key = path` for errors about the argument as a whole.
pub(crate) struct PathArg {
    pub(crate) path: Path,
    pub(crate) span: Span,
}

/// The parsed arguments; every one is optional.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) name: Option<LitStr>,
    /// `true` for `inbound`.
    pub(crate) inbound: Option<bool>,
    pub(crate) batch_count: Option<LitInt>,
    pub(crate) args: Option<Vec<Ident>>,
    pub(crate) block_handler: Option<PathArg>,
    pub(crate) fallback: Option<PathArg>,
    /// With the span of the `exceptions_to_ignore` keyword.
    pub(crate) exceptions_to_ignore: Option<(Span, Vec<Pat>)>,
    pub(crate) sentinel: Option<Path>,
    /// `crate = path`: where the core's items are, for a renamed dependency.
    pub(crate) krate: Option<Path>,
}

/// Stores `value` in `slot`, or fails at `span` if the argument was given.
fn set<T>(slot: &mut Option<T>, value: T, span: Span, what: &str) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            span,
            format!("duplicate argument `{what}`: give it once"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

fn string(input: ParseStream<'_>, what: &str) -> syn::Result<LitStr> {
    if input.peek(LitStr) {
        input.parse()
    } else {
        Err(input.error(format!(
            "`{what}` takes a string literal, as in `{what} = \"orders::create\"`"
        )))
    }
}

fn path_arg(input: ParseStream<'_>, key_span: Span, what: &str) -> syn::Result<PathArg> {
    input.parse::<Token![=]>()?;
    let path: Path = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("`{what}` takes the path of a function, as in `{what} = path::to::function`"),
        )
    })?;
    let span = key_span.join(path.span()).unwrap_or(key_span);
    Ok(PathArg { path, span })
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            if input.peek(LitStr) {
                let name: LitStr = input.parse()?;
                let span = name.span();
                set(&mut args.name, name, span, "name")?;
            } else if input.peek(kw::name) {
                let key = input.parse::<kw::name>()?;
                input.parse::<Token![=]>()?;
                set(&mut args.name, string(input, "name")?, key.span, "name")?;
            } else if input.peek(kw::entry_type) {
                let key = input.parse::<kw::entry_type>()?;
                input.parse::<Token![=]>()?;
                let inbound = if input.peek(kw::inbound) {
                    input.parse::<kw::inbound>()?;
                    true
                } else if input.peek(kw::outbound) {
                    input.parse::<kw::outbound>()?;
                    false
                } else {
                    return Err(input.error("`entry_type` is `inbound` or `outbound`"));
                };
                set(&mut args.inbound, inbound, key.span, "entry_type")?;
            } else if input.peek(kw::batch_count) {
                let key = input.parse::<kw::batch_count>()?;
                input.parse::<Token![=]>()?;
                let count = if input.peek(LitInt) {
                    input.parse::<LitInt>()?
                } else {
                    return Err(input.error("`batch_count` takes an integer literal from 1"));
                };
                match count.base10_parse::<u32>() {
                    Ok(n) if n >= 1 => {}
                    _ => {
                        return Err(syn::Error::new(
                            count.span(),
                            "`batch_count` is a whole number from 1 to 4294967295",
                        ));
                    }
                }
                set(&mut args.batch_count, count, key.span, "batch_count")?;
            } else if input.peek(kw::args) {
                let key = input.parse::<kw::args>()?;
                let content;
                syn::parenthesized!(content in input);
                let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                let mut seen: Vec<Ident> = Vec::new();
                for name in names {
                    if seen.contains(&name) {
                        return Err(syn::Error::new(
                            name.span(),
                            format!("`{name}` is named twice in `args(...)`"),
                        ));
                    }
                    seen.push(name);
                }
                set(&mut args.args, seen, key.span, "args")?;
            } else if input.peek(kw::block_handler) {
                let key = input.parse::<kw::block_handler>()?;
                let handler = path_arg(input, key.span, "block_handler")?;
                set(&mut args.block_handler, handler, key.span, "block_handler")?;
            } else if input.peek(kw::fallback) {
                let key = input.parse::<kw::fallback>()?;
                let fallback = path_arg(input, key.span, "fallback")?;
                set(&mut args.fallback, fallback, key.span, "fallback")?;
            } else if input.peek(kw::exceptions_to_ignore) {
                let key = input.parse::<kw::exceptions_to_ignore>()?;
                let content;
                syn::parenthesized!(content in input);
                let patterns =
                    Punctuated::<Pat, Token![,]>::parse_terminated_with(&content, |input| {
                        Pat::parse_multi_with_leading_vert(input)
                    })?;
                let patterns = (key.span, patterns.into_iter().collect());
                set(
                    &mut args.exceptions_to_ignore,
                    patterns,
                    key.span,
                    "exceptions_to_ignore",
                )?;
            } else if input.peek(kw::sentinel) {
                let key = input.parse::<kw::sentinel>()?;
                let instance = path_arg(input, key.span, "sentinel")?;
                set(&mut args.sentinel, instance.path, key.span, "sentinel")?;
            } else if input.peek(Token![crate]) {
                let key = input.parse::<Token![crate]>()?;
                input.parse::<Token![=]>()?;
                let path: Path = input.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`crate` takes the path of the crate, as in `crate = ::my_sentinel`",
                    )
                })?;
                set(&mut args.krate, path, key.span, "crate")?;
            } else if input.peek(Ident) {
                let unknown: Ident = input.parse()?;
                return Err(syn::Error::new(
                    unknown.span(),
                    format!("unknown argument `{unknown}`; {EXPECTED}"),
                ));
            } else {
                return Err(input.error(EXPECTED));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}
