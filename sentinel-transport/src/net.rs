//! Where the server listens and how the dashboard reaches it: the port
//! search, the callback IP, the app's default name.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};

use crate::handle::StartError;

/// How many ports past the asked one are tried when it is taken.
const PORT_TRIES: u16 = 100;

/// The listener on `port` or the next free port above it.
pub(crate) fn bind(ip: IpAddr, port: u16) -> Result<TcpListener, StartError> {
    let mut last = None;
    let tries = if port == 0 { 1 } else { PORT_TRIES };
    for offset in 0..tries {
        let Some(port) = port.checked_add(offset) else {
            break;
        };
        match TcpListener::bind(SocketAddr::new(ip, port)) {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(StartError::Bind { port, error: e }),
        }
    }
    Err(StartError::Bind {
        port,
        error: last.unwrap_or_else(|| std::io::Error::other("no port left to try")),
    })
}

/// The IP the dashboard can call back on.
pub(crate) fn callback_ip(bind: IpAddr, dashboard: Option<&String>) -> IpAddr {
    if !bind.is_unspecified() {
        return bind;
    }
    // The local end of a route to the dashboard: connecting a UDP socket
    // sends nothing.
    let route = dashboard.and_then(|d| {
        let host = d.trim().trim_start_matches("http://");
        let host = host.split('/').next()?;
        let target = std::net::ToSocketAddrs::to_socket_addrs(host)
            .ok()?
            .next()?;
        let socket = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)).ok()?;
        socket.connect(target).ok()?;
        Some(socket.local_addr().ok()?.ip())
    });
    route.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// The executable's name, Sentinel's fallback for the app name.
pub(crate) fn default_app() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| {
            p.file_stem()
                .map(|s| without_cargo_hash(&s.to_string_lossy()))
        })
        .unwrap_or_else(|| "sentinel-rs".to_owned())
}

/// `name` without the `-<16 hex digits>` cargo gives test and example
/// binaries.
fn without_cargo_hash(name: &str) -> String {
    match name.rsplit_once('-') {
        Some((stem, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            stem.to_owned()
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_ip_is_the_bind_address_or_the_route_to_the_dashboard() {
        let ten = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(callback_ip(ten, None), ten);
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let local = "127.0.0.1:8080".to_owned();
        assert_eq!(
            callback_ip(any, Some(&local)),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        let url = "http://127.0.0.1:8080/sentinel".to_owned();
        assert_eq!(
            callback_ip(any, Some(&url)),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(callback_ip(any, None), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn the_default_app_name_drops_a_cargo_hash() {
        assert!(!default_app().is_empty());
        assert!(
            !default_app().contains('-') || default_app().rsplit('-').next().unwrap().len() != 16
        );
    }
}
