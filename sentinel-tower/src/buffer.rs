//! This thread's buffer for joining a resource name (`METHOD:path`, or a
//! cleaned path): its capacity stays, so naming a known resource allocates
//! nothing.

thread_local! {
    /// Where this thread joins names: its capacity stays, so joining a
    /// known name allocates nothing, and pushing `str`s needs no UTF-8
    /// check.
    static JOINED: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The largest buffer a thread keeps between names.
const MAX_KEPT: usize = 1_024;

/// `method:path`, in this thread's buffer.
pub(crate) fn with_joined<T>(method: &str, path: &str, f: impl FnOnce(&str) -> T) -> T {
    with_buffer(
        |name| {
            name.push_str(method);
            name.push(':');
            name.push_str(path);
        },
        f,
    )
}

/// Calls `f` with the name `fill` writes, in this thread's buffer (in a
/// new `String` when the buffer is in use up the stack, or when the thread
/// is exiting).
pub(crate) fn with_buffer<T>(fill: impl Fn(&mut String), f: impl FnOnce(&str) -> T) -> T {
    let mut f = Some(f);
    let named = JOINED.try_with(|buffer| {
        let mut buffer = buffer.try_borrow_mut().ok()?;
        buffer.clear();
        fill(&mut buffer);
        let result = (f.take()?)(&buffer);
        if buffer.capacity() > MAX_KEPT {
            // One odd long path does not keep its buffer for the thread's life.
            *buffer = String::new();
        }
        Some(result)
    });
    match (named, f) {
        (Ok(Some(result)), _) => result,
        (_, Some(f)) => {
            let mut name = String::new();
            fill(&mut name);
            f(&name)
        }
        (_, None) => unreachable!("the closure ran but gave no result"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_joined_also_when_the_buffer_is_in_use() {
        let path = format!("/{}", "a".repeat(300));
        with_joined("GET", &path, |name| assert_eq!(name, format!("GET:{path}")));
        with_joined("GET", "/x", |outer| {
            // Nested: the thread's buffer is borrowed, a `String` is made.
            with_joined("POST", "/y", |inner| assert_eq!(inner, "POST:/y"));
            assert_eq!(outer, "GET:/x");
        });
    }
}
