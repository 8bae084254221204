"""The SSRF guard on its own: what resolves where is faked (socket.getaddrinfo), so that public and
private answers, and an answer that changes (DNS rebinding), can be tried without a network."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from outfitter.config import Settings
from outfitter.webhooks import urls
from outfitter.webhooks.urls import UnsafeUrl, check_for_registration, pinned_target

STRICT = Settings(webhook_allow_private=False)


def fake_dns(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    def getaddrinfo(host: str, port: int, *_args: Any) -> list[tuple[Any, ...]]:
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in address else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (address, port),
            )
            for address in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_public_host_is_sent_to_the_address_that_was_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, "8.8.8.8")
    target = pinned_target("https://hooks.example.com:8443/in?x=1", STRICT)
    assert target.url == "https://8.8.8.8:8443/in?x=1"
    assert target.host_header == "hooks.example.com:8443" and target.sni_hostname == "hooks.example.com"


@pytest.mark.parametrize(
    "answers",
    [
        ("10.0.0.5",),
        ("8.8.8.8", "127.0.0.1"),
        ("::1",),
        ("::ffff:192.168.1.1",),
        ("169.254.169.254",),
        ("100.64.0.1",),
    ],
)
def test_a_host_resolving_to_any_private_address_is_refused(
    monkeypatch: pytest.MonkeyPatch, answers: tuple[str, ...]
) -> None:
    fake_dns(monkeypatch, *answers)
    with pytest.raises(UnsafeUrl):
        check_for_registration("https://hooks.example.com/in", STRICT)
    with pytest.raises(UnsafeUrl):
        pinned_target("https://hooks.example.com/in", STRICT)


def test_rebinding_after_registration_is_caught_at_send_time(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, "8.8.8.8")
    check_for_registration("https://hooks.example.com/in", STRICT)
    fake_dns(monkeypatch, "127.0.0.1")
    with pytest.raises(UnsafeUrl):
        pinned_target("https://hooks.example.com/in", STRICT)


def test_a_host_that_does_not_resolve_is_accepted_at_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch)
    check_for_registration("https://not-yet.example.com/in", STRICT)


def test_private_receivers_are_allowed_by_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, "127.0.0.1")
    allowed = Settings(webhook_allow_private=True)
    check_for_registration("http://localhost:8080/in", allowed)
    assert pinned_target("http://localhost:8080/in", allowed).url == "http://localhost:8080/in"


def test_http_follows_the_environment_unless_set() -> None:
    assert Settings(environment="embedded").webhooks_allow_http is True
    production = Settings.model_construct(environment="production", webhook_allow_http=None)
    assert production.webhooks_allow_http is False
    with pytest.raises(UnsafeUrl, match="https://"):
        check_for_registration("http://8.8.8.8/in", Settings(webhook_allow_http=False))


@pytest.mark.parametrize(
    "host",
    [
        "[2002:7f00:1::]",  # 6to4 around 127.0.0.1
        "[2002:a00:1::]",  # 6to4 around 10.0.0.1
        "[64:ff9b::7f00:1]",  # NAT64 around 127.0.0.1
        "[64:ff9b::a9fe:a9fe]",  # NAT64 around 169.254.169.254
        "[::ffff:7f00:1]",  # IPv4-mapped 127.0.0.1
        "[::ffff:10.0.0.1]",
        "[::127.0.0.1]",  # IPv4-compatible (deprecated) 127.0.0.1
    ],
)
def test_an_ipv6_address_embedding_a_private_ipv4_is_refused(host: str) -> None:
    with pytest.raises(UnsafeUrl, match="loopback, private"):
        check_for_registration(f"https://{host}/in", STRICT)
    with pytest.raises(UnsafeUrl, match="non-public"):
        pinned_target(f"https://{host}/in", STRICT)


def test_an_ipv6_address_embedding_a_public_ipv4_stays_accepted() -> None:
    check_for_registration("https://[2002:808:808::]/in", STRICT)  # 6to4 around 8.8.8.8


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://hooks.example.com:0/in", "port"),
        ("https://exa mple.com/x", "host"),
        ("https://exa\tmple.com/x", "host"),
        ("https://exa\x01mple.com/x", "host"),
        ("https://exa\x7fmple.com/x", "host"),
    ],
)
def test_port_zero_and_a_host_with_a_space_or_control_character_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UnsafeUrl, match=reason):
        check_for_registration(url, STRICT)


def test_a_refusal_at_send_time_does_not_name_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, "10.20.30.40")
    with pytest.raises(UnsafeUrl) as refused:
        pinned_target("https://hooks.example.com/in", STRICT)
    assert str(refused.value) == "the host resolves to a non-public address"


def hanging_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A resolver that never answers in time (the guard gives up after RESOLVE_TIMEOUT_SECONDS,
    shortened here); the names it was asked."""
    asked: list[str] = []

    def getaddrinfo(host: str, *_args: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        time.sleep(0.5)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(urls, "RESOLVE_TIMEOUT_SECONDS", 0.05)
    return asked


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "api.localhost",
        "localhost.localdomain",
        "2130706433",  # 127.0.0.1 as one number
        "017700000001",  # in octal
        "0x7f.1",
        "127.1",
        "0",  # 0.0.0.0
        "10.1",  # 10.0.0.1
    ],
)
def test_local_names_and_ipv4_shorthands_are_refused_without_asking_a_resolver(
    monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    """A resolver that is slow or down must not let them through registration as "does not
    resolve" (a name that does not resolve is accepted: it may not exist yet)."""
    asked = hanging_dns(monkeypatch)
    with pytest.raises(UnsafeUrl, match="loopback, private"):
        check_for_registration(f"https://{host}:8443/in", STRICT)
    with pytest.raises(UnsafeUrl, match="non-public"):
        pinned_target(f"https://{host}:8443/in", STRICT)
    assert asked == []


def test_an_ipv4_shorthand_of_a_public_address_is_sent_to_that_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = hanging_dns(monkeypatch)
    target = pinned_target("https://134744072/in", STRICT)  # 8.8.8.8
    assert target.url == "https://8.8.8.8/in" and asked == []
