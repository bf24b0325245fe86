"""Which addresses a URL a client named may reach (pure).

Two classes of destination, decided on the address a connection would actually go to
(after DNS, so a name cannot hide one):

* **Never**: unspecified (``0.0.0.0``, ``::``), link-local (``169.254.0.0/16`` — the
  cloud metadata address ``169.254.169.254`` among them — and ``fe80::/10``),
  AWS's IPv6 metadata address ``fd00:ec2::254``, multicast, broadcast and reserved
  ranges. No allow-list entry opens these.
* **Only when named literally**: loopback and private ranges (``127.0.0.0/8``,
  ``::1``, ``10/8``, ``172.16/12``, ``192.168/16``, the shared ``100.64/10``, unique
  local ``fc00::/7``). An operator may allow ``http://127.0.0.1:8000/`` or
  ``http://localhost:11434/`` on purpose; a *name* that resolves to such an address
  (DNS rebinding, an internal record) is refused.

IPv4 written inside IPv6 (``::ffff:127.0.0.1``, NAT64 ``64:ff9b::7f00:1``, 6to4) is
judged as the IPv4 address it carries.
"""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["address_refusal", "is_loopback_name"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA_V6: Final = ipaddress.IPv6Address("fd00:ec2::254")
_SHARED: Final = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_BROADCAST: Final = ipaddress.IPv4Address("255.255.255.255")


def is_loopback_name(host: str) -> bool:
    """``localhost`` and names under it (RFC 6761: they always mean this machine)."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def _embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def address_refusal(address: str, *, named_literally: bool) -> str | None:
    """Why a connection to ``address`` is refused (``None``: it may go ahead).

    Args:
        address: the IP address the connection would go to.
        named_literally: the allowed URL names this very address (an IP literal) or a
            loopback name (``localhost``) and the address is loopback.

    Returns:
        A sentence saying what kind of address it is, for the error.
    """
    try:
        ip = _embedded(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return f"{address!r} is not an IP address"
    if ip.is_unspecified or ip.is_multicast:
        return f"{ip} is not a destination (unspecified or multicast)"
    if ip.is_link_local or ip == _METADATA_V6:
        return f"{ip} is link-local (cloud metadata lives there); no allow-list opens it"
    if ip == _BROADCAST:
        return f"{ip} is the broadcast address"
    shared = isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED
    if ip.is_loopback or ip.is_private or shared:
        if named_literally:
            return None
        kind = "loopback" if ip.is_loopback else "private"
        return (
            f"the name resolves to {ip}, a {kind} address; an operator who means it "
            "allows the address itself (http://ADDRESS:PORT/)"
        )
    if ip.is_reserved:
        return f"{ip} is in a reserved range"
    return None
