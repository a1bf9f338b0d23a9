//! Generating the guarded function.
//!
//! The function keeps its attributes, visibility and signature; its body
//! becomes:
//!
//! ```text
//! let entry = { static RESOURCE; RESOURCE.get(instance, name).builder()…enter() };
//! let entry = match entry { Ok(e) => EntryGuard::new(e), Err(block) => return <on block> };
//! // no `Result`: the original block, as the tail
//! // `Result`: let result = (|| <block>)();   (`async <block>.await` in an async fn)
//! //           an `Err` not ignored: recorded on the entry, handed to the fallback
//! ```
//!
//! A `Result` body runs in a closure (an async block) so that `return` and
//! `?` inside it come back through the error check. The closure borrows what
//! the body only borrows, so the arguments are still there for a fallback.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{AttrStyle, FnArg, Ident, ItemFn, Pat, ReturnType, Type};

use crate::attr::Args;

/// The expansion of `#[sentinel_resource(args)]` on `item`: the guarded
/// function, or the item untouched plus the error.
pub(crate) fn sentinel_resource(args: TokenStream, item: TokenStream) -> TokenStream {
    let result = syn::parse2::<Args>(args).and_then(|args| {
        let func = syn::parse2::<ItemFn>(item.clone()).map_err(|e| {
            syn::Error::new(
                e.span(),
                "`#[sentinel_resource]` guards a function with a body",
            )
        })?;
        guard(&args, func)
    });
    match result {
        Ok(tokens) => tokens,
        Err(error) => {
            let error = error.to_compile_error();
            quote!(#item #error)
        }
    }
}

/// The path of the crate whose items the expansion names: `crate = path`
/// when given; else the umbrella (`sentinel-flow`) or the core
/// (`sentinel-flow-core`), under whatever name the caller's `Cargo.toml`
/// gives it; else `::sentinel_flow_core`.
fn core_path(args: &Args) -> TokenStream {
    if let Some(path) = &args.krate {
        return path.to_token_stream();
    }
    for (package, lib) in [
        ("sentinel-flow", "sentinel_flow"),
        ("sentinel-flow-core", "sentinel_flow_core"),
    ] {
        let name = match proc_macro_crate::crate_name(package) {
            Ok(proc_macro_crate::FoundCrate::Name(name)) => name,
            // The package's own tests and examples name its library.
            Ok(proc_macro_crate::FoundCrate::Itself) => lib.to_owned(),
            Err(_) => continue,
        };
        let ident = Ident::new(&name, Span::call_site());
        return quote!(::#ident);
    }
    quote!(::sentinel_flow_core)
}

/// A local of the generated code, out of reach of the function's body.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn guard(args: &Args, func: ItemFn) -> syn::Result<TokenStream> {
    let krate = core_path(args);
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new(
            constness.span,
            "`#[sentinel_resource]` cannot guard a `const fn`: a resource is entered at run time",
        ));
    }
    let is_async = sig.asyncness.is_some();
    let output = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => Some(&**ty),
    };
    let returns_result = output.is_some_and(is_result);
    if !returns_result && args.block_handler.is_none() {
        return Err(syn::Error::new(
            Span::call_site(),
            "`#[sentinel_resource]` needs `block_handler = path::to::fn` here: a blocked call \
             must return something, and this function does not return `Result<T, E>` \
             (where a block would become `Err(E::from(BlockError))`)",
        ));
    }
    if !returns_result {
        if let Some(fallback) = &args.fallback {
            return Err(syn::Error::new(
                fallback.span,
                "`fallback` handles the `Err` of a function that returns `Result`; \
                 this one does not",
            ));
        }
        if let Some((span, _)) = &args.exceptions_to_ignore {
            return Err(syn::Error::new(
                *span,
                "`exceptions_to_ignore` matches the `Err` of a function that returns `Result`; \
                 this one does not",
            ));
        }
    }

    let forwarded = if args.block_handler.is_some() || args.fallback.is_some() {
        forwarded_params(&sig)?
    } else {
        Vec::new()
    };
    let (args_array, builder_calls) = builder_calls(args, &sig, &krate)?;

    let name = match &args.name {
        Some(name) => name.to_token_stream(),
        None => {
            let fn_name = sig.ident.to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #fn_name))
        }
    };
    let instance = match &args.sentinel {
        Some(path) => quote_spanned!(path.span()=> #path),
        None => quote!(#krate::global),
    };
    let dot_await = is_async.then(|| quote!(.await));
    let entry = local("__sentinel_entry");
    let block_error = local("__sentinel_block");
    let result = local("__sentinel_result");
    let error = local("__sentinel_error");

    let enter = if is_async {
        quote!(#krate::__private::enter_async(__sentinel_builder).await)
    } else {
        quote!(__sentinel_builder.enter())
    };
    let on_block = match &args.block_handler {
        Some(handler) => {
            let path = &handler.path;
            let params = forwarded_at(&forwarded, handler.span);
            quote!(#path(#(#params,)* #block_error) #dot_await)
        }
        None => {
            // Checked above: the function returns `Result`.
            let at = output.map_or_else(Span::call_site, error_type_span);
            let block_error = located(&block_error, at);
            let converted = quote_spanned!(at=>
                <_ as #krate::__private::FromBlock>::__sentinel_from_block(#block_error)
            );
            match &args.fallback {
                Some(fallback) => {
                    let path = &fallback.path;
                    let params = forwarded_at(&forwarded, fallback.span);
                    quote!(#path(#(#params,)* #converted) #dot_await)
                }
                None => quote!(::core::result::Result::Err(#converted)),
            }
        }
    };

    let (outer_attrs, inner_attrs): (Vec<_>, Vec<_>) = attrs
        .into_iter()
        .partition(|attr| matches!(attr.style, AttrStyle::Outer));

    let body = if returns_result {
        let annotation = output
            .filter(|ty| !mentions_impl(ty.to_token_stream()))
            .map(|ty| quote!(: #ty));
        let run = if is_async {
            quote!(let #result #annotation = async #block.await;)
        } else {
            let closure_output = annotation.as_ref().map(|_| {
                let ty = output;
                quote!(-> #ty)
            });
            quote! {
                #[allow(clippy::redundant_closure_call)]
                let #result = (|| #closure_output #block)();
            }
        };
        let record = match &args.exceptions_to_ignore {
            Some((_, patterns)) if !patterns.is_empty() => {
                let patterns = patterns.iter().map(ignore_pattern);
                quote! {{
                    #[allow(unreachable_patterns)]
                    match &#error {
                        #(#patterns)|* => false,
                        _ => true,
                    }
                }}
            }
            _ => quote!(true),
        };
        let finish = match &args.fallback {
            Some(fallback) => {
                let path = &fallback.path;
                let params = forwarded_at(&forwarded, fallback.span);
                quote! {
                    match #result {
                        ::core::result::Result::Err(#error) if #record => {
                            #entry.set_error(&#error);
                            #path(#(#params,)* #error) #dot_await
                        }
                        #result => #result,
                    }
                }
            }
            None => quote! {
                if let ::core::result::Result::Err(#error) = &#result {
                    if #record {
                        #entry.set_error(#error);
                    }
                }
                #result
            },
        };
        quote!(#run #finish)
    } else {
        quote!(#block)
    };

    Ok(quote! {
        #(#outer_attrs)*
        #vis #sig {
            #(#inner_attrs)*
            let #entry = {
                static __SENTINEL_RESOURCE: #krate::__private::ResourceCell =
                    #krate::__private::ResourceCell::new();
                #[allow(unused_imports)]
                use #krate::__private::ToParam as _;
                #args_array
                let __sentinel_builder = __SENTINEL_RESOURCE.get(#instance, #name).builder()
                    #builder_calls;
                #enter
            };
            let #entry = match #entry {
                ::core::result::Result::Ok(#entry) => #krate::__private::EntryGuard::new(#entry),
                ::core::result::Result::Err(#block_error) => return #on_block,
            };
            #body
        }
    })
}

/// `.entry_type(..)`, `.batch_count(..)` and `.args(&..)`, as given, with
/// the `let` of the arguments' array when there are some.
fn builder_calls(
    args: &Args,
    sig: &syn::Signature,
    krate: &TokenStream,
) -> syn::Result<(Option<TokenStream>, TokenStream)> {
    let mut args_array = None;
    let mut calls = TokenStream::new();
    if let Some(inbound) = args.inbound {
        let variant = if inbound {
            quote!(Inbound)
        } else {
            quote!(Outbound)
        };
        calls.extend(quote!(.entry_type(#krate::EntryType::#variant)));
    }
    if let Some(count) = &args.batch_count {
        calls.extend(quote!(.batch_count(#count)));
    }
    if let Some(names) = &args.args {
        let mut values = Vec::new();
        for name in names {
            let param = sig.inputs.iter().find_map(|input| match input {
                FnArg::Typed(typed) => match &*typed.pat {
                    Pat::Ident(ident) if ident.ident == *name => Some(&ident.ident),
                    _ => None,
                },
                FnArg::Receiver(_) => None,
            });
            let Some(param) = param else {
                return Err(syn::Error::new(
                    name.span(),
                    format!("`{name}` in `args(...)` is not a parameter of this function"),
                ));
            };
            values.push(quote_spanned!(name.span()=> (&&#param).__sentinel_param()));
        }
        args_array = Some(quote!(let __sentinel_args = [#(#values),*];));
        calls.extend(quote!(.args(&__sentinel_args)));
    }
    Ok((args_array, calls))
}

/// The parameters a handler receives, in order: `self` first if the function
/// has a receiver. Every parameter needs a plain name to be passed on.
fn forwarded_params(sig: &syn::Signature) -> syn::Result<Vec<Ident>> {
    sig.inputs
        .iter()
        .map(|input| match input {
            FnArg::Receiver(receiver) => Ok(Ident::new("self", receiver.self_token.span)),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(ident) if ident.by_ref.is_none() && ident.subpat.is_none() => {
                    Ok(ident.ident.clone())
                }
                pat => Err(syn::Error::new(
                    pat.span(),
                    "`block_handler` and `fallback` receive the function's arguments: \
                     give this parameter a plain name",
                )),
            },
        })
        .collect()
}

/// The forwarded parameters with `span`, so that a parameter the body has
/// consumed is reported at the handler that wants it.
fn forwarded_at(params: &[Ident], span: Span) -> Vec<Ident> {
    params
        .iter()
        .map(|param| {
            let mut param = param.clone();
            param.set_span(span);
            param
        })
        .collect()
}

/// `ident` (a local of the generated code) shown at `span` in errors.
fn located(ident: &Ident, span: Span) -> Ident {
    let mut ident = ident.clone();
    ident.set_span(ident.span().located_at(span));
    ident
}

/// Where the error type of a `Result` is written: `E` in `Result<T, E>`, or
/// the whole type (`io::Result<T>`).
fn error_type_span(ty: &Type) -> Span {
    if let Type::Path(path) = ty {
        if let Some(segment) = path.path.segments.last() {
            if let syn::PathArguments::AngleBracketed(generics) = &segment.arguments {
                if generics.args.len() == 2 {
                    return generics.args[1].span();
                }
            }
        }
    }
    ty.span()
}

/// A pattern of `exceptions_to_ignore`. A lone name is read as a unit
/// variant or struct, never as a binding that would match every error.
fn ignore_pattern(pattern: &Pat) -> TokenStream {
    match pattern {
        Pat::Ident(ident)
            if ident.by_ref.is_none() && ident.mutability.is_none() && ident.subpat.is_none() =>
        {
            let name = &ident.ident;
            quote_spanned!(name.span()=> #name { .. })
        }
        other => other.to_token_stream(),
    }
}

/// Whether `ty` reads as a `Result`: its last path segment is `Result`
/// (`Result<T, E>`, `io::Result<T>`, `anyhow::Result<T>`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Result"),
        Type::Group(group) => is_result(&group.elem),
        Type::Paren(paren) => is_result(&paren.elem),
        _ => false,
    }
}

/// Whether the type has an `impl Trait` in it, which a `let` or a closure
/// cannot be annotated with.
fn mentions_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Ident(ident) => ident == "impl",
        TokenTree::Group(group) => mentions_impl(group.stream()),
        _ => false,
    })
}
