//! Where webhooks may go: the URL rules checked when an endpoint is saved, and the
//! address rules checked on every delivery after DNS resolution (`dispatcher`), so that
//! an endpoint cannot make Cairn reach its own network (SSRF).
//!
//! In production a URL is `https` and each of its host's addresses is public: not
//! loopback, private, shared (CGNAT), link-local (the instance metadata service among
//! them), unspecified, documentation, benchmarking, multicast or reserved, in IPv4 or
//! IPv6, an IPv4 address inside an IPv6 one (mapped, compatible, NAT64, 6to4) judged
//! as that IPv4 address. `url` parses every form WHATWG does (`2130706433`,
//! `0x7f.1`, `017700000001`, `[::ffff:127.0.0.1]`), so a literal in any form is judged
//! by its value. A local stack may allow loopback addresses (and `http`) explicitly
//! ([`Policy::AllowLoopback`], `WEBHOOK_ALLOW_LOOPBACK=true`), never other private ones.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// The longest endpoint URL.
pub const URL_MAX: usize = 2048;

/// Which destinations are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Public `https` destinations only (production).
    PublicOnly,
    /// Also loopback addresses, over `http` or `https` (a local stack).
    AllowLoopback,
}

impl Policy {
    /// The policy of this process: [`Policy::AllowLoopback`] when
    /// `WEBHOOK_ALLOW_LOOPBACK` is `true`.
    #[must_use]
    pub fn from_env() -> Self {
        match std::env::var("WEBHOOK_ALLOW_LOOPBACK").as_deref() {
            Ok("true") => Self::AllowLoopback,
            _ => Self::PublicOnly,
        }
    }

    /// Whether a delivery may connect to `ip`.
    #[must_use]
    pub fn allows(self, ip: IpAddr) -> bool {
        is_public(ip) || (self == Self::AllowLoopback && is_loopback(ip))
    }
}

/// Checks an endpoint URL as given by a client; returns it normalised.
///
/// # Errors
/// Why it is refused, in words for a 422.
pub fn check_url(raw: &str, policy: Policy) -> Result<Url, String> {
    if raw.len() > URL_MAX {
        return Err(format!("must be at most {URL_MAX} characters"));
    }
    let url = Url::parse(raw).map_err(|e| format!("is not a URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password".to_owned());
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment (#...)".to_owned());
    }
    let host = url.host().ok_or_else(|| "must name a host".to_owned())?;
    let loopback_host = match &host {
        Host::Ipv4(ip) => Some(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => Some(IpAddr::V6(*ip)),
        Host::Domain(_) => None,
    }
    .map(|ip| {
        if policy.allows(ip) { Ok(is_loopback(ip)) } else { Err(format!("names {ip}, which is not a public address")) }
    })
    .transpose()?
    .unwrap_or_else(|| is_local_name(url.host_str().unwrap_or_default()));
    if loopback_host && policy == Policy::PublicOnly {
        return Err("names a local host; webhooks go to public https URLs".to_owned());
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback_host && policy == Policy::AllowLoopback => Ok(url),
        _ => Err("must be an https URL".to_owned()),
    }
}

/// `localhost` and its subdomains (RFC 6761), which resolve to loopback.
fn is_local_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

fn is_loopback(ip: IpAddr) -> bool {
    match embedded_v4(ip) {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// An IPv4 address carried inside an IPv6 one, as that IPv4 address; any other as is.
fn embedded_v4(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    let s = v6.segments();
    let [a, b, c, d] = v6.octets()[12..16] else { return ip };
    let tail = IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible, deprecated; not :: or ::1)
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && (s[6] != 0 || s[7] > 1))) {
        return tail;
    }
    // 64:ff9b::a.b.c.d and 64:ff9b:1::/48 (NAT64)
    if s[0] == 0x64 && s[1] == 0xff9b && (s[2..6] == [0; 4] || s[2] == 1) {
        return tail;
    }
    // 2002:AABB:CCDD::/48 (6to4)
    if s[0] == 0x2002 {
        let [_, _, a, b, c, d, ..] = v6.octets();
        return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    }
    ip
}

/// Whether `ip` is a public unicast address.
#[must_use]
pub fn is_public(ip: IpAddr) -> bool {
    match embedded_v4(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                    // "this network"
        || a == 10                              // private
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || a == 127                             // loopback
        || (a == 169 && b == 254)               // link-local, the metadata service
        || (a == 172 && (16..32).contains(&b))  // private
        || (a == 192 && b == 0 && c == 0)       // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)       // documentation
        || (a == 192 && b == 88 && c == 99)     // 6to4 relay anycast
        || (a == 192 && b == 168)               // private
        || (a == 198 && (18..20).contains(&b))  // benchmarking
        || (a == 198 && b == 51 && c == 100)    // documentation
        || (a == 203 && b == 0 && c == 113)     // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00            // unique local
        || (s[0] & 0xffc0) == 0xfe80            // link-local
        || (s[0] & 0xffc0) == 0xfec0            // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00            // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8)   // documentation
        || (s[0] == 0x2001 && s[1] < 0x0200)    // IETF protocol assignments (Teredo among them)
        || (s[0] == 0x0100 && s[1..4] == [0; 3]) // discard-only
        || s[0] == 0x3fff && s[1] < 0x1000      // documentation (2024)
        || s[0] == 0) // the rest of ::/16 (IPv4-compatible and reserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> bool {
        check_url(url, Policy::PublicOnly).is_err()
    }

    #[test]
    fn private_and_special_addresses_are_refused_in_every_form() {
        for url in [
            "https://127.0.0.1/hook",
            "https://2130706433/hook",   // 127.0.0.1 as one decimal number
            "https://0x7f.1/hook",       // hex and short form
            "https://017700000001/hook", // octal
            "https://0/hook",
            "https://10.1.2.3/",
            "https://100.64.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://172.16.0.1/",
            "https://192.168.1.1/",
            "https://198.18.0.1/",
            "https://224.0.0.1/",
            "https://255.255.255.255/",
            "https://[::1]/",
            "https://[::]/",
            "https://[::ffff:127.0.0.1]/", // mapped
            "https://[::ffff:7f00:1]/",    // mapped, in hex
            "https://[::ffff:169.254.169.254]/",
            "https://[::127.0.0.1]/",       // compatible
            "https://[64:ff9b::10.0.0.1]/", // NAT64
            "https://[2002:c0a8:0101::1]/", // 6to4 of 192.168.1.1
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://[fd00:ec2::254]/", // the metadata service over IPv6
            "https://[ff02::1]/",
            "https://[2001:db8::1]/",
            "https://localhost/",
            "https://api.localhost./",
        ] {
            assert!(refused(url), "{url} must be refused");
        }
    }

    #[test]
    fn public_https_urls_are_accepted_and_others_refused() {
        for url in ["https://example.com/hooks/cairn", "https://93.184.215.14:8443/x?y=1", "https://[2606:4700::1111]/"]
        {
            assert!(check_url(url, Policy::PublicOnly).is_ok(), "{url} must be accepted");
        }
        for url in [
            "http://example.com/",
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
            "not a url",
            "https://",
        ] {
            assert!(refused(url), "{url} must be refused");
        }
        assert!(refused(&format!("https://example.com/{}", "a".repeat(URL_MAX))));
    }

    #[test]
    fn a_local_stack_may_allow_loopback_and_nothing_else_private() {
        let local = Policy::AllowLoopback;
        assert!(check_url("http://127.0.0.1:9000/hook", local).is_ok());
        assert!(check_url("http://localhost:9000/hook", local).is_ok());
        assert!(check_url("http://[::1]:9000/hook", local).is_ok());
        assert!(check_url("http://example.com/", local).is_err(), "http only to loopback");
        assert!(check_url("https://10.0.0.1/", local).is_err());
        assert!(check_url("https://169.254.169.254/", local).is_err());
        assert!(local.allows("127.0.0.1".parse().expect("ip")));
        assert!(!Policy::PublicOnly.allows("127.0.0.1".parse().expect("ip")));
        assert!(!local.allows("192.168.0.1".parse().expect("ip")));
    }

    #[test]
    fn resolved_addresses_are_judged_by_their_value() {
        for ip in ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["127.0.0.53", "::ffff:10.0.0.1", "64:ff9b::127.0.0.1", "fc00::1", "2001::1", "::2"] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
