"""The runner protocol's version: both sides refuse another one, naming both (a
version-1 runner would run a sandboxed session's tools unconfined)."""

from __future__ import annotations

import pytest

from omnigent.rpc import RpcError
from omnigent.runner import (
    PROTOCOL_MISMATCH,
    PROTOCOL_VERSION,
    Hello,
    Welcome,
    parse_hello,
    parse_welcome,
)


def test_another_version_is_refused_both_ways() -> None:
    assert PROTOCOL_VERSION == 2
    hello = Hello("laptop", link=None, received=0, runner_version="x").to_params()
    assert parse_hello(hello).name == "laptop"
    welcome = Welcome("laptop", "link_" + "0" * 24, False, 0, 2.0, 10.0).to_result()
    assert parse_welcome(welcome).runner_id == "laptop"
    for old in (1, 3, True):
        with pytest.raises(RpcError) as refused:
            parse_hello({**hello, "protocolVersion": old})
        assert refused.value.code == PROTOCOL_MISMATCH
        assert refused.value.data["supported"] == [2]
        with pytest.raises(RpcError) as answered:
            parse_welcome({**welcome, "protocolVersion": old})
        assert answered.value.code == PROTOCOL_MISMATCH
