"""Egress rules and the proxy's decisions, without I/O."""

from __future__ import annotations

import re

import pytest

from omnigent.processes.sandbox._proxy_protocol import (
    RequestError,
    decide,
    origin_request,
    parse_request,
    permitted_address,
)
from omnigent.spec import EgressRules, parse_egress_rule

GITHUB = EgressRules.parse(["GET api.github.com/repos/databricks/*/**", "* *.pypi.org"])


@pytest.mark.parametrize(
    ("method", "host", "port", "path", "admitted"),
    [
        ("GET", "api.github.com", 80, "/repos/databricks/cli", True),
        ("GET", "api.github.com", 443, "/repos/databricks/cli/pulls/1", True),
        ("get", "API.github.com.", 80, "/repos/databricks/cli", True),
        ("POST", "api.github.com", 80, "/repos/databricks/cli", False),
        ("GET", "api.github.com", 80, "/repos/other/cli", False),
        ("GET", "api.github.com", 80, "/repos/databricks", False),
        ("GET", "api.github.com", 22, "/repos/databricks/cli", False),
        ("GET", "evil.com", 80, "/repos/databricks/cli", False),
        ("DELETE", "files.pypi.org", 443, "/anything", True),
        ("GET", "pypi.org", 443, "/simple", False),
        ("GET", "api.github.com", 80, "/repos/databricks/../../admin", False),
        ("GET", "api.github.com", 80, "/repos/databricks/%2e%2e/admin", False),
        ("GET", "api.github.com", 80, "/repos/databricks/a%2Fb", False),
    ],
)
def test_a_plain_request_is_matched_on_method_host_port_and_path(
    method: str, host: str, port: int, path: str, admitted: bool
) -> None:
    assert (GITHUB.request(method, host, port, path) is not None) is admitted


def test_a_tunnel_is_matched_on_host_and_port_only() -> None:
    assert GITHUB.tunnel("api.github.com", 443) is not None
    assert GITHUB.tunnel("api.github.com", 8443) is None
    assert GITHUB.tunnel("x.pypi.org", 443) is not None
    assert GITHUB.tunnel("github.com", 443) is None


def test_a_rule_with_a_port_admits_that_port_only() -> None:
    rules = EgressRules.parse(["POST 10.0.0.5:8080/v1/**", "GET [::1]:9000"])
    assert rules.request("POST", "10.0.0.5", 8080, "/v1/x") is not None
    assert rules.request("POST", "10.0.0.5", 80, "/v1/x") is None
    assert rules.tunnel("::1", 9000) is not None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("api.github.com", "expected 'METHODS host/path'"),
        ("GET a b", "expected 'METHODS host/path'"),
        ("G3T x.com", "methods must be"),
        ("GET x..com/", "not a host name"),
        ("GET x.com:99999", "a port is a number"),
        ("GET x.com/a/../b", "may not hold"),
        ("GET [::1", "closing ']'"),
    ],
)
def test_malformed_rules_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_egress_rule(text)


def test_parse_names_the_failing_rule() -> None:
    with pytest.raises(ValueError, match="rule 1: "):
        EgressRules.parse(["GET a.com", "nope"])


def test_a_connect_request_is_judged_by_host() -> None:
    request = parse_request(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443")
    assert request.tunnel
    assert decide(request, GITHUB).allowed
    other = parse_request(b"CONNECT example.com:443 HTTP/1.1")
    verdict = decide(other, GITHUB)
    assert not verdict.allowed and "example.com:443" in verdict.reason


def test_a_plain_request_is_rewritten_to_origin_form_with_one_host() -> None:
    head = (
        b"POST http://api.github.com/repos/databricks/cli?x=1 HTTP/1.1\r\n"
        b"Host: evil.example\r\nProxy-Connection: keep-alive\r\nContent-Length: 3\r\n"
        b"Accept: */*"
    )
    request = parse_request(head)
    assert (request.host, request.port, request.path, request.length) == (
        "api.github.com",
        80,
        "/repos/databricks/cli?x=1",
        3,
    )
    sent = origin_request(request)
    assert sent.startswith(b"POST /repos/databricks/cli?x=1 HTTP/1.1\r\nHost: api.github.com\r\n")
    assert b"evil.example" not in sent and b"Proxy-Connection" not in sent
    assert sent.endswith(b"Accept: */*\r\nConnection: close\r\n\r\n")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /relative HTTP/1.1", 400),
        (b"GET https://x.com/ HTTP/1.1", 400),
        (b"GET http://u:p@x.com/ HTTP/1.1", 400),
        (b"POST http://x.com/ HTTP/1.1\r\nTransfer-Encoding: chunked", 411),
        (b"POST http://x.com/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400),
        (b"CONNECT x.com HTTP/1.1", 400),
        (b"nonsense", 400),
    ],
)
def test_requests_the_proxy_does_not_serve(head: bytes, status: int) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(head)
    assert caught.value.status == status


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("168.63.129.16", False),
        ("::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
    ],
)
def test_only_global_addresses_are_dialled_by_default(address: str, public: bool) -> None:
    assert permitted_address(address, allow_private=False) is public
    assert permitted_address(address, allow_private=True)
