//! The client's address: the connection's peer, or, when the peer is a
//! trusted proxy, the right-most untrusted address its forwarding headers
//! name; and the key it is limited by (IPv6 grouped by prefix).

use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use http::{Extensions, HeaderMap, HeaderName};
use sentinel_flow_core::{InlineStr, ParamValue};

/// The most forwarding hops read, from the right: past them the client is
/// the last address read.
pub const MAX_FORWARDED_HOPS: usize = 32;

static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// A block of addresses: `10.0.0.0/8`, `2001:db8::/32`, or one address
/// (`192.0.2.7`, a `/32` or `/128`). An IPv4-mapped IPv6 address is its
/// IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a [`Cidr`] did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrError(String);

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CidrError {}

impl Cidr {
    /// The block of `addr`'s first `prefix` bits (at most 32 for IPv4,
    /// 128 for IPv6).
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self, CidrError> {
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(CidrError(format!(
                "prefix /{prefix} is longer than the address ({max} bits)"
            )));
        }
        Ok(Cidr {
            network: mask(addr, prefix),
            prefix,
        })
    }

    /// Whether `addr` is in the block.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        addr.is_ipv4() == self.network.is_ipv4() && mask(addr, self.prefix) == self.network
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| CidrError(format!("not an IP address: {:?}", addr.trim())))?;
        let addr = addr.to_canonical();
        let prefix = match prefix {
            None => {
                if addr.is_ipv4() {
                    32
                } else {
                    128
                }
            }
            Some(prefix) => prefix
                .trim()
                .parse::<u8>()
                .map_err(|_| CidrError(format!("not a prefix length: {:?}", prefix.trim())))?,
        };
        Cidr::new(addr, prefix)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// `addr` with all but its first `prefix` bits zero.
fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits & kept))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits & kept))
        }
    }
}

/// How a layer finds and groups client addresses.
#[derive(Clone, Debug)]
pub(crate) struct ClientIpSettings {
    /// The trusted proxies; `None` for none (a clone then copies no
    /// reference).
    pub(crate) trusted: Option<Arc<[Cidr]>>,
    pub(crate) ipv4_prefix: u8,
    pub(crate) ipv6_prefix: u8,
}

impl Default for ClientIpSettings {
    fn default() -> Self {
        ClientIpSettings {
            trusted: None,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
        }
    }
}

/// The peer of the connection, from the request's extensions: axum's
/// `ConnectInfo<SocketAddr>` (a server made with
/// `into_make_service_with_connect_info`), or a `SocketAddr` or `IpAddr`
/// a hyper server put there.
pub(crate) fn peer(extensions: &Extensions) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    extensions
        .get::<SocketAddr>()
        .map(SocketAddr::ip)
        .or_else(|| extensions.get::<IpAddr>().copied())
}

impl ClientIpSettings {
    fn is_trusted(&self, addr: IpAddr) -> bool {
        self.trusted
            .iter()
            .flat_map(|trusted| trusted.iter())
            .any(|cidr| cidr.contains(addr))
    }

    /// The client's address: `peer`, unless it is a trusted proxy; then
    /// the right-most address of `Forwarded` (else `X-Forwarded-For`,
    /// else `X-Real-IP`) that is not a trusted proxy, read from the right
    /// (what each trusted proxy appended). An element that is no address
    /// (`unknown`, an obfuscated name) ends the walk at the proxy that
    /// wrote it; every address trusted: the left-most.
    #[inline]
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if self.trusted.is_none() {
            return peer;
        }
        self.behind(peer, headers)
    }

    /// [`client`](Self::client) with trusted proxies: the peer's own
    /// address unless it is one of them.
    fn behind(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.is_trusted(peer) {
            return peer;
        }
        let (name, parse): (&HeaderName, fn(&str) -> Option<IpAddr>) =
            if headers.contains_key(&FORWARDED) {
                (&FORWARDED, forwarded_for)
            } else if headers.contains_key(&X_FORWARDED_FOR) {
                (&X_FORWARDED_FOR, bare_address)
            } else {
                (&X_REAL_IP, bare_address)
            };
        let mut client = peer;
        let hops = headers
            .get_all(name)
            .iter()
            .rev()
            .flat_map(|value| value.to_str().unwrap_or("unknown").rsplit(','))
            .take(MAX_FORWARDED_HOPS);
        for hop in hops {
            match parse(hop.trim()) {
                None => return client,
                Some(addr) => {
                    client = addr.to_canonical();
                    if !self.is_trusted(client) {
                        return client;
                    }
                }
            }
        }
        client
    }

    /// The group `addr` is limited as: its address with the host bits
    /// past the configured prefix zeroed (an IPv6 client is its /64 by
    /// default).
    #[inline]
    pub(crate) fn group(&self, addr: IpAddr) -> IpAddr {
        let addr = addr.to_canonical();
        let prefix = match addr {
            IpAddr::V4(_) => self.ipv4_prefix,
            IpAddr::V6(_) => self.ipv6_prefix,
        };
        mask(addr, prefix)
    }

    /// The argument of the client `group` (from [`group`](Self::group)):
    /// its address as text, as Sentinel passes it, which an item's pattern
    /// is matched against and which any other rule of the resource reads
    /// (inline up to 22 bytes: no allocation for IPv4 or a /64).
    pub(crate) fn text(group: IpAddr) -> ParamValue {
        match group {
            IpAddr::V4(v4) => ipv4_text(v4),
            // 39 bytes at most (a full IPv6 address): always fits in 40.
            v6 => {
                let mut text = StackText::default();
                let _ = write!(text, "{v6}");
                ParamValue::from(text.as_str())
            }
        }
    }
}

/// Each octet in decimal followed by a dot, as the little-endian bytes
/// of a word, and the count of its digits.
static OCTET_TEXT: [(u32, u32); 256] = {
    let mut table = [(0, 0); 256];
    let mut octet = 0;
    while octet < 256 {
        let (hundreds, tens, ones) = (octet / 100, octet / 10 % 10, octet % 10);
        let (digits, count) = if octet >= 100 {
            (
                [b'0' + hundreds as u8, b'0' + tens as u8, b'0' + ones as u8],
                3,
            )
        } else if octet >= 10 {
            ([b'0' + tens as u8, b'0' + ones as u8, b'.'], 2)
        } else {
            ([b'0' + ones as u8, b'.', 0], 1)
        };
        let mut bytes = [digits[0], digits[1], digits[2], 0];
        bytes[count] = b'.';
        table[octet] = (u32::from_le_bytes(bytes), count as u32);
        octet += 1;
    }
    table
};

/// `addr` in dotted decimal, written straight into an inline string (the
/// per-request path of every IPv4 client: no formatting machinery, no
/// UTF-8 check of digits): each octet's text and dot put in place in one
/// 16-byte word, which is stored once (bytes stored one word at a time
/// and then read whole wait for the stores to drain). The octets are put
/// together in pairs, each pair within 8 bytes, and the pairs once.
fn ipv4_text(addr: Ipv4Addr) -> ParamValue {
    let [a, b, c, d] = addr.octets().map(|octet| OCTET_TEXT[usize::from(octet)]);
    // An octet's text and dot: 4 bytes at most, so a pair's 8.
    let pair = |(first, first_len): (u32, u32), (second, second_len): (u32, u32)| {
        let word = u64::from(first) | u64::from(second) << (8 * (first_len + 1));
        (word, first_len + second_len + 2)
    };
    let ((low, low_len), (high, high_len)) = (pair(a, b), pair(c, d));
    // At most 8 bytes before the second pair's 8: within the 16.
    let text = u128::from(low) | u128::from(high) << (8 * low_len);
    let len = low_len + high_len;
    let mut bytes = [0; InlineStr::CAPACITY];
    bytes[..16].copy_from_slice(&text.to_le_bytes());
    // The last octet's dot is past the text.
    match InlineStr::from_ascii(bytes, len as usize - 1) {
        Some(text) => ParamValue::InlineStr(text),
        // Unreachable: 15 ASCII bytes at most.
        None => ParamValue::from(addr.to_string()),
    }
}

/// An address as X-Forwarded-For and X-Real-IP write it: `192.0.2.1`,
/// `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`.
fn bare_address(text: &str) -> Option<IpAddr> {
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(addr);
    }
    text.parse::<SocketAddr>().ok().map(|addr| addr.ip())
}

/// The `for=` address of one `Forwarded` element (`for=192.0.2.60;proto=http`,
/// `for="[2001:db8::1]:4711"`); `None` for `unknown`, an obfuscated
/// identifier or no `for`.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then_some(value.trim())
    })?;
    let value = value.trim_matches('"');
    let bracketed = value
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map(|(addr, _)| addr);
    match bracketed {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => bare_address(value),
    }
}

/// A short text on the stack (an IPv6 key).
struct StackText {
    bytes: [u8; 40],
    len: usize,
}

impl Default for StackText {
    fn default() -> Self {
        StackText {
            bytes: [0; 40],
            len: 0,
        }
    }
}

impl StackText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let end = self.len + text.len();
        if end > self.bytes.len() {
            return Err(fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn behind(trusted: &[&str]) -> ClientIpSettings {
        ClientIpSettings {
            trusted: Some(trusted.iter().map(|c| c.parse().unwrap()).collect()),
            ..ClientIpSettings::default()
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn cidrs_parse_and_contain() {
        let cidr: Cidr = "10.1.2.3/8".parse().unwrap();
        assert_eq!(cidr.to_string(), "10.0.0.0/8");
        assert!(cidr.contains(ip("10.255.0.1")) && !cidr.contains(ip("11.0.0.1")));
        assert!(
            cidr.contains(ip("::ffff:10.0.0.1")),
            "a mapped address is its IPv4"
        );
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        let host: Cidr = "192.0.2.7".parse().unwrap();
        assert!(host.contains(ip("192.0.2.7")) && !host.contains(ip("192.0.2.8")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("1.2.3.4")));
        for bad in ["10.0.0.0/33", "::/129", "x/8", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let settings = behind(&["10.0.0.0/8"]);
        let spoofed = headers(&[("x-forwarded-for", "203.0.113.9"), ("x-real-ip", "1.1.1.1")]);
        assert_eq!(
            settings.client(ip("198.51.100.1"), &spoofed),
            ip("198.51.100.1")
        );
        // No trusted proxies at all: the peer.
        assert_eq!(
            ClientIpSettings::default().client(ip("10.0.0.1"), &spoofed),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_address_is_the_client() {
        let settings = behind(&["10.0.0.0/8"]);
        let chain = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.0.0.2")]);
        assert_eq!(settings.client(ip("10.0.0.1"), &chain), ip("203.0.113.9"));
        // Over two header lines, the later one on the right.
        let split = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "203.0.113.9:5000, 10.0.0.3"),
        ]);
        assert_eq!(settings.client(ip("10.0.0.1"), &split), ip("203.0.113.9"));
        // Forwarded wins over X-Forwarded-For.
        let forwarded = headers(&[
            (
                "forwarded",
                r#"for=6.6.6.6, for="[2001:db8::7]:4711";proto=https"#,
            ),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            settings.client(ip("10.0.0.1"), &forwarded),
            ip("2001:db8::7")
        );
        let real = headers(&[("x-real-ip", "203.0.113.5")]);
        assert_eq!(settings.client(ip("10.0.0.1"), &real), ip("203.0.113.5"));
        // No header: the proxy itself.
        assert_eq!(
            settings.client(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // `unknown` written by a trusted proxy: the walk ends at that proxy.
        let unknown = headers(&[("forwarded", "for=6.6.6.6, for=unknown, for=10.0.0.4")]);
        assert_eq!(settings.client(ip("10.0.0.1"), &unknown), ip("10.0.0.4"));
        // All trusted: the left-most.
        let inner = headers(&[("x-forwarded-for", "10.0.0.9, 10.0.0.8")]);
        assert_eq!(settings.client(ip("10.0.0.1"), &inner), ip("10.0.0.9"));
    }

    #[test]
    fn ipv4_texts_are_the_dotted_decimal_text_of_the_address() {
        let settings = ClientIpSettings::default();
        let key = |addr: IpAddr| ClientIpSettings::text(settings.group(addr));
        for octet in 0..=255u8 {
            for addr in [
                Ipv4Addr::new(octet, 0, 9, 255),
                Ipv4Addr::new(10, octet, 100, 99),
                Ipv4Addr::new(255, 255, 255, octet),
            ] {
                let key = key(IpAddr::V4(addr));
                assert_eq!(key, ParamValue::from(addr.to_string().as_str()));
                assert_eq!(key.as_str(), Some(addr.to_string().as_str()));
            }
        }
        let slash24 = ClientIpSettings {
            ipv4_prefix: 24,
            ..ClientIpSettings::default()
        };
        assert_eq!(
            ClientIpSettings::text(slash24.group(ip("192.0.2.201"))).as_str(),
            Some("192.0.2.0")
        );
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_prefix() {
        let settings = ClientIpSettings::default();
        let text = |settings: &ClientIpSettings, addr| ClientIpSettings::text(settings.group(addr));
        assert_eq!(
            text(&settings, ip("2001:db8:1:2:aaaa::1")),
            text(&settings, ip("2001:db8:1:2:bbbb::2"))
        );
        assert_ne!(
            text(&settings, ip("2001:db8:1:2::1")),
            text(&settings, ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            text(&settings, ip("2001:db8:1:2:aaaa::1")).as_str(),
            Some("2001:db8:1:2::")
        );
        assert_eq!(
            text(&settings, ip("::ffff:192.0.2.1")).as_str(),
            Some("192.0.2.1")
        );
        let full = ClientIpSettings {
            ipv6_prefix: 128,
            ..ClientIpSettings::default()
        };
        let long = "2001:db8:1111:2222:3333:4444:5555:6666";
        assert_eq!(text(&full, ip(long)).as_str(), Some(long));
    }
}
