//! Methods, generics, async fns, borrowed and `impl Trait` returns, traits.
#![deny(warnings)]

use std::fmt::Display;

use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

pub struct Store {
    items: Vec<String>,
}

impl Store {
    #[sentinel_resource]
    pub fn first(&self) -> Result<&str, BlockError> {
        Ok(self.items.first().map_or("", String::as_str))
    }

    #[sentinel_resource(block_handler = Self::blocked_push)]
    pub fn push(&mut self, item: String) -> usize {
        self.items.push(item);
        self.items.len()
    }

    fn blocked_push(&mut self, _item: String, _: BlockError) -> usize {
        self.items.len()
    }

    #[sentinel_resource]
    pub fn into_items(self) -> Result<Vec<String>, BlockError> {
        Ok(self.items)
    }

    #[sentinel_resource]
    pub async fn first_async(&self) -> Result<&str, BlockError> {
        Ok(self.items.first().map_or("", String::as_str))
    }

    #[sentinel_resource]
    pub fn iter(&self) -> Result<impl Iterator<Item = &String> + '_, BlockError> {
        Ok(self.items.iter())
    }
}

/// Generic, with a where clause and a lifetime; no bound is added.
#[sentinel_resource(block_handler = longest_blocked)]
pub fn longest<'a, T>(items: &'a [T]) -> Option<&'a T>
where
    T: Display,
{
    items.iter().max_by_key(|item| item.to_string().len())
}

fn longest_blocked<T: Display>(_: &[T], _: BlockError) -> Option<&T> {
    None
}

#[sentinel_resource]
pub async fn generic_async<T: Display + Send>(value: T) -> Result<String, BlockError> {
    Ok(value.to_string())
}

#[sentinel_resource]
pub fn displayable(n: u32) -> Result<impl Display, BlockError> {
    Ok(n)
}

#[sentinel_resource]
pub fn with_patterns((a, b): (u32, u32), _: u8) -> Result<u32, BlockError> {
    Ok(a + b)
}

#[sentinel_resource]
pub fn inner_attributes() -> Result<(), BlockError> {
    #![allow(unused_variables)]
    let unused = 1;
    Ok(())
}

pub trait Repository {
    fn find(&self, id: u64) -> Result<u64, BlockError>;

    #[sentinel_resource]
    fn exists(&self, id: u64) -> Result<bool, BlockError> {
        Ok(self.find(id)? > 0)
    }
}

impl Repository for Store {
    #[sentinel_resource("repository:find", args(id))]
    fn find(&self, id: u64) -> Result<u64, BlockError> {
        Ok(id)
    }
}

#[sentinel_resource]
pub unsafe fn unsafe_fn(p: *const u8) -> Result<u8, BlockError> {
    Ok(unsafe { *p })
}

fn main() {
    let mut store = Store { items: Vec::new() };
    store.push("a".into());
    let _ = store.first();
    let _ = store.iter().map(|items| items.count());
    let _ = store.exists(1);
    let _ = longest(&[1, 22]);
    let _ = displayable(1);
    let _ = with_patterns((1, 2), 0);
    let _ = inner_attributes();
    let byte = 1u8;
    let _ = unsafe { unsafe_fn(&byte) };
    let _ = store.first_async();
    let _ = generic_async(1);
    let _ = store.into_items();
}
