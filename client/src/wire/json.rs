//! The JSON-RPC envelope of one NDJSON line (docs/protocol.md §1
//! Framing), found without parsing what it carries: the `id`, the
//! `method`, and where the `result`, `error` or `params` value lies in the
//! line. A driver hands those bytes on as they came (to V8's `JSON.parse`,
//! to serde), so a value is parsed once, by whoever needs it.
//!
//! A scanner, not a validator: it walks strings (with their escapes),
//! nesting and scalars only far enough to find where each value ends.
//! Whoever parses a value refuses anything malformed in it.

/// A line's top-level members (those a client reads).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Envelope<'a> {
    /// The `id` as written (`None`: no `id` member).
    pub id_raw: Option<&'a [u8]>,
    /// The `id` as a number; `None` for a notification, an error about a
    /// request the broker could not read (`"id": null`), or an id that is
    /// not an unsigned integer.
    pub id: Option<u64>,
    pub result: Option<&'a [u8]>,
    pub error: Option<&'a [u8]>,
    /// The `method`, with its quotes.
    pub method: Option<&'a [u8]>,
    pub params: Option<&'a [u8]>,
}

/// Reads the top level of `line` (one JSON object).
pub fn envelope(line: &[u8]) -> Result<Envelope<'_>, &'static str> {
    let mut a = Envelope::default();
    members(line, |key, value| {
        match key {
            b"id" => {
                a.id_raw = Some(value);
                a.id = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
            b"result" => a.result = Some(value),
            b"error" => a.error = Some(value),
            b"method" => a.method = Some(value),
            b"params" => a.params = Some(value),
            _ => {}
        }
        true
    })?;
    Ok(a)
}

/// The value of member `key` of the object `obj`, if it has one.
pub fn member<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    members(obj, |k, v| {
        if k == key.as_bytes() {
            found = Some(v);
            false
        } else {
            true
        }
    })
    .ok()?;
    found
}

/// Calls `f(key, value)` for each member of the object `b` (keys as
/// written, without their quotes; values as their bytes) until it returns
/// false.
fn members<'a>(
    b: &'a [u8],
    mut f: impl FnMut(&'a [u8], &'a [u8]) -> bool,
) -> Result<(), &'static str> {
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Err("an answer is not a JSON object");
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(());
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return Err("a member name is not a string");
        }
        let key_end = string_end(b, i)?;
        let key = &b[i + 1..key_end - 1];
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return Err("a member has no ':'");
        }
        let start = ws(b, i + 1);
        let end = value_end(b, start)?;
        if !f(key, &b[start..end]) {
            return Ok(());
        }
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Ok(()),
            _ => return Err("an object is not closed"),
        }
    }
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

/// The index after the string starting at `b[i] == '"'`.
fn string_end(b: &[u8], i: usize) -> Result<usize, &'static str> {
    let mut j = i + 1;
    loop {
        match memchr::memchr2(b'"', b'\\', &b[j..]) {
            Some(k) if b[j + k] == b'"' => return Ok(j + k + 1),
            Some(k) => j += k + 2,
            None => return Err("a string is not closed"),
        }
        if j > b.len() {
            return Err("a string is not closed");
        }
    }
}

/// The index after the value starting at `b[i]`.
fn value_end(b: &[u8], i: usize) -> Result<usize, &'static str> {
    match b.get(i) {
        None => Err("a value is missing"),
        Some(b'"') => string_end(b, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Err("an object or array is not closed")
        }
        Some(_) => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')
            {
                j += 1;
            }
            Ok(j)
        }
    }
}

/// The quick reading of an answer line as the broker writes it (members
/// in name order: `id` before `result`, `result` last): the id, and the
/// result as everything after `"result":` up to the line's closing brace,
/// without walking the result. A guess: the parse of the value checks it
/// (a value that runs into another member does not parse), and the caller
/// then reads the line with [`envelope`]. `None` where the shape is not
/// this one (an error, members in another order).
pub fn answer_quick(line: &[u8]) -> Option<(u64, &[u8])> {
    let mut i = ws(line, 0);
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(line, i + 1);
    let mut id = None;
    loop {
        if line.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(line, i).ok()?;
        let key = &line[i + 1..key_end - 1];
        i = ws(line, key_end);
        if line.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(line, i + 1);
        if key == b"result" {
            let close = memchr::memrchr(b'}', line)?;
            return Some((id?, trim(line.get(start..close)?)));
        }
        let end = value_end(line, start).ok()?;
        if key == b"id" {
            id = std::str::from_utf8(&line[start..end]).ok()?.parse().ok();
        }
        i = ws(line, end);
        if line.get(i) != Some(&b',') {
            return None;
        }
        i = ws(line, i + 1);
    }
}

/// The quick reading of a one-member object `{"key": value}`: the value,
/// up to the object's closing brace (a guess, checked as
/// [`answer_quick`]'s is).
pub fn member_quick<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut i = ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(obj, i + 1);
    let k = key.as_bytes();
    if obj.get(i) != Some(&b'"')
        || obj.get(i + 1..i + 1 + k.len()) != Some(k)
        || obj.get(i + 1 + k.len()) != Some(&b'"')
    {
        return None;
    }
    i = ws(obj, i + k.len() + 2);
    if obj.get(i) != Some(&b':') {
        return None;
    }
    let close = memchr::memrchr(b'}', obj)?;
    Some(trim(obj.get(i + 1..close)?))
}

fn trim(b: &[u8]) -> &[u8] {
    let start = ws(b, 0);
    let mut end = b.len();
    while end > start && matches!(b[end - 1], b' ' | b'\t' | b'\r' | b'\n') {
        end -= 1;
    }
    &b[start..end]
}
