"""Which webhook URLs Outfitter will send to: the SSRF guard, at registration and at every send.

A receiver's host must not be, or resolve to, an address inside the operator's network (loopback,
private, link-local, reserved, multicast, unspecified), unless OUTFITTER_WEBHOOK_ALLOW_PRIVATE is
true (local development, tests). `localhost` and the names under it are refused by name, and
IPv4's shorthands (2130706433, 0x7f.1) read as the addresses they are, with no resolver asked. At
registration a host that does not resolve is accepted (it may not exist yet). At send time the
host is resolved again and the request goes to the address that was checked (`pinned_target`), so
a DNS answer that changes between the check and the connection (DNS rebinding) cannot steer it
inside.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from outfitter.config import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# getaddrinfo has no timeout of its own; a resolver that hangs must not hold a request.
RESOLVE_TIMEOUT_SECONDS = 3.0
_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="outfitter-resolve")


NOT_PUBLIC = (
    "The URL's host is or resolves to a loopback, private, link-local or reserved address "
    "(or an IPv6 address embedding one)."
)
# At send time, in the delivery log: not which address, which would tell what lies inside.
SENT_NOWHERE_INSIDE = "the host resolves to a non-public address"


class UnsafeUrl(ValueError):
    """Why a URL is refused, in a sentence for the client."""


class Unresolvable(Exception):
    """The host does not resolve (now)."""


@dataclass(frozen=True)
class Target:
    """Where a send really goes: the URL to connect to (its host an address already checked, or the
    original URL when private receivers are allowed), and the headers/extensions that keep the
    original host name for the receiver (Host) and for TLS (SNI and certificate check)."""

    url: str
    host_header: str | None
    sni_hostname: str | None


def check_syntax(url: str, settings: Settings) -> tuple[str, str, int]:
    """The scheme, host and port of an acceptable URL; raises UnsafeUrl."""
    # Checked on the raw text: urlsplit silently drops tabs and line breaks, and keeps spaces and
    # control characters in the host, which a resolver or an HTTP library may read differently.
    if any(character.isspace() or not character.isprintable() for character in url):
        raise UnsafeUrl("The URL may not contain spaces or control characters: check the host and path.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeUrl("Not a valid URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        accepted = "https:// or http://" if settings.webhooks_allow_http else "https://"
        raise UnsafeUrl(f"The URL must start with {accepted}.")
    if scheme == "http" and not settings.webhooks_allow_http:
        raise UnsafeUrl("The URL must use https:// (http:// is allowed only when the operator enables it).")
    if not parts.hostname:
        raise UnsafeUrl("The URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("The URL may not carry a user name or password: authenticate with the signature.")
    if port == 0:
        raise UnsafeUrl("The URL's port must be between 1 and 65535.")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


NAT64_PREFIXES = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and that a translating network would reach: IPv4-mapped
    (::ffff:a.b.c.d), 6to4 (2002:AABB:CCDD::), NAT64 (64:ff9b::a.b.c.d) and IPv4-compatible
    (::a.b.c.d)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in prefix for prefix in (*NAT64_PREFIXES, IPV4_COMPATIBLE)):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden_address(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None and forbidden_address(inner):
            return True
        if address.ipv4_mapped is not None:
            return False  # judged by the IPv4 address it maps (above), not by the ::ffff:0:0/96 block
    return not address.is_global or address.is_multicast or address.is_reserved or address.is_unspecified


def local_name(host: str) -> bool:
    """A name that is this machine's whatever a resolver answers (RFC 6761: `localhost` and the
    names under it), so refused without asking one: a resolver that is slow or down must not let it
    through registration as "does not resolve"."""
    name = host.rstrip(".").lower()
    return name in ("localhost", "localhost.localdomain") or name.endswith(".localhost")


def address_literal(host: str) -> IPAddress | None:
    """The address `host` spells, in any form the resolver reads without a lookup: the standard
    ones, and IPv4's shorthands (2130706433, 017700000001, 0x7f.1, 127.1), which are 127.0.0.1."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to; raises Unresolvable."""
    literal = address_literal(host)
    if literal is not None:
        return [literal]
    future = _resolver.submit(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    try:
        found = future.result(timeout=RESOLVE_TIMEOUT_SECONDS)
    except (OSError, UnicodeError, concurrent.futures.TimeoutError) as exc:
        raise Unresolvable(str(exc) or type(exc).__name__) from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Unresolvable("no address")
    return addresses


def check_for_registration(url: str, settings: Settings) -> None:
    """Raises UnsafeUrl for a URL that may not be registered. Resolves the host: call it with no
    database transaction open."""
    _scheme, host, port = check_syntax(url, settings)
    if settings.webhook_allow_private:
        return
    if local_name(host):
        raise UnsafeUrl(NOT_PUBLIC)
    try:
        addresses = resolve(host, port)
    except Unresolvable:
        return  # it may not exist yet; sends to it fail and are retried until it does
    if any(forbidden_address(address) for address in addresses):
        raise UnsafeUrl(NOT_PUBLIC)


def pinned_target(url: str, settings: Settings) -> Target:
    """Where to send now, checked again (DNS can change); raises UnsafeUrl or Unresolvable."""
    scheme, host, port = check_syntax(url, settings)
    if settings.webhook_allow_private:
        return Target(url=url, host_header=None, sni_hostname=None)
    if local_name(host):
        raise UnsafeUrl(SENT_NOWHERE_INSIDE)
    addresses = resolve(host, port)
    if any(forbidden_address(address) for address in addresses):
        raise UnsafeUrl(SENT_NOWHERE_INSIDE)
    parts = urlsplit(url)
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    host_header = parts.netloc.rsplit("@", 1)[-1]
    return Target(
        url=parts._replace(netloc=netloc).geturl(),
        host_header=host_header,
        sni_hostname=host if scheme == "https" else None,
    )
