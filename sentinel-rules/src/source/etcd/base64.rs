//! Standard base64 with padding (RFC 4648), as etcd's gateway writes keys
//! and values in its JSON.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in base64, padded.
pub(super) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(encoded_len(bytes.len()));
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The length of `len` bytes in padded base64.
pub(super) fn encoded_len(len: usize) -> usize {
    len.div_ceil(3).saturating_mul(4)
}

fn value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// The bytes `text` encodes; `Err` names the first bad place.
pub(super) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let text = text.as_bytes();
    if text.len() % 4 != 0 {
        return Err(format!(
            "base64 of {} characters, not a multiple of 4",
            text.len()
        ));
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let groups = text.len() / 4;
    for (g, group) in text.chunks(4).enumerate() {
        let pad = group.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && g + 1 != groups) {
            return Err(format!("base64 padding inside the text (group {g})"));
        }
        let mut n = 0u32;
        for (i, &c) in group[..4 - pad].iter().enumerate() {
            let v = value(c).ok_or_else(|| {
                format!(
                    "a byte 0x{c:02x} that is not base64 at offset {}",
                    g * 4 + i
                )
            })?;
            n |= v << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Ok(out)
}

/// The decoded length of `chars` base64 characters of which `pad` are
/// padding.
pub(super) fn decoded_len(chars: u64, pad: u64) -> u64 {
    (chars / 4 * 3).saturating_sub(pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length_and_byte() {
        let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for len in 0..bytes.len() {
            let text = encode(&bytes[..len]);
            assert_eq!(text.len(), encoded_len(len));
            assert_eq!(decode(&text).unwrap(), &bytes[..len], "{len}");
            let pad = text.bytes().rev().take_while(|&c| c == b'=').count() as u64;
            assert_eq!(decoded_len(text.len() as u64, pad), len as u64);
        }
    }

    #[test]
    fn known_texts() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"f"), "Zg==");
        assert_eq!(encode(b"fo"), "Zm8=");
        assert_eq!(encode(b"foo"), "Zm9v");
        assert_eq!(encode(b"/sentinel/rules"), "L3NlbnRpbmVsL3J1bGVz");
        assert_eq!(decode("aGVsbG8=").unwrap(), b"hello");
    }

    #[test]
    fn bad_texts_are_refused_with_their_place() {
        assert!(decode("abc").unwrap_err().contains("multiple of 4"));
        assert!(
            decode("ab=c")
                .unwrap_err()
                .contains("not base64 at offset 2")
        );
        assert!(decode("Zg==Zg==").unwrap_err().contains("padding inside"));
        assert!(decode("Z===").unwrap_err().contains("padding"));
        assert!(decode("a\"bc").unwrap_err().contains("0x22"));
    }
}
