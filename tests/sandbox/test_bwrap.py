"""linux_bwrap with real bubblewrap: what a sandboxed process can see, write and reach."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import omnigent
from omnigent.processes.sandbox import Backend, SandboxPolicy, open_sandbox

from .helpers import loopback_http, policy, require_bwrap, run_inside

pytestmark = pytest.mark.usefixtures("bwrap")


@pytest.fixture
def bwrap() -> str:
    return require_bwrap()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A workspace and a home with a secret, side by side."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / "notes.txt").write_text("home notes\n")
    workspace = tmp_path / "work"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / ".env").write_text("TOKEN=s3cret\n")
    (workspace / "src").mkdir()
    (workspace / "src" / ".env").write_text("NESTED=s3cret\n")
    (workspace / "readme").write_text("hello\n")
    yield workspace, home


async def test_only_the_workspace_is_writable(world: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, home = world
    outside = tmp_path / "outside"
    outside.mkdir()
    with trio.fail_after(20):
        async with open_sandbox(policy(workspace, home)) as box:
            inside = await run_inside(box, "echo made > new.txt && cat new.txt")
            assert (inside.code, inside.out) == (0, "made\n")
            refused = await run_inside(box, f"echo x > {outside}/x")
            system = await run_inside(box, "echo x > /etc/omnigent-sandbox-test")
    assert (workspace / "new.txt").read_text() == "made\n"
    assert refused.code != 0 and not (outside / "x").exists()
    assert "Read-only file system" in system.err
    assert not await trio.Path("/etc/omnigent-sandbox-test").exists()


async def test_the_home_and_environment_secrets_are_invisible(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, home = world
    monkeypatch.setenv("OMNIGENT_TEST_SECRET", "do-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    with trio.fail_after(20):
        async with open_sandbox(policy(workspace, home)) as box:
            ran = await run_inside(box, f"ls -A {home}; cat {home}/.ssh/id_ed25519; env")
    assert "PRIVATE KEY" not in ran.out and "notes.txt" not in ran.out
    assert "do-not-leak" not in ran.out
    assert f"HOME={home}" in ran.out


async def test_env_passthrough_names_what_comes_in(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, home = world
    monkeypatch.setenv("OMNIGENT_TEST_SHARED", "shared-value")
    monkeypatch.setenv("OMNIGENT_TEST_SECRET", "do-not-leak")
    granted = policy(workspace, home, env_passthrough=["OMNIGENT_TEST_SHARED"])
    with trio.fail_after(20):
        async with open_sandbox(granted) as box:
            ran = await run_inside(box, "env")
    assert "OMNIGENT_TEST_SHARED=shared-value" in ran.out
    assert "do-not-leak" not in ran.out


async def test_hidden_entries_are_masked_unless_allowed(world: tuple[Path, Path]) -> None:
    workspace, home = world
    show = "cat .env; cat src/.env; ls -A .git; cat readme"
    with trio.fail_after(20):
        async with open_sandbox(policy(workspace, home)) as box:
            masked = await run_inside(box, show)
            overwrite = await run_inside(box, "echo bad > .git/config")
        allowed = policy(workspace, home, allow_hidden=[".git", ".env"])
        async with open_sandbox(allowed) as box:
            shown = await run_inside(box, show)
    assert "s3cret" not in masked.out and "config" not in masked.out
    assert masked.out.endswith("hello\n")
    assert overwrite.code != 0 and (workspace / ".git" / "config").read_text() == "[core]\n"
    assert "TOKEN=s3cret" in shown.out and "NESTED=s3cret" in shown.out and "config" in shown.out


async def test_read_paths_and_write_files_grant_exactly_what_they_name(
    world: tuple[Path, Path],
) -> None:
    workspace, home = world
    (home / ".databrickscfg").write_text("[DEFAULT]\n")
    (home / ".ssh" / "known_hosts").write_text("")
    granted = policy(
        workspace,
        home,
        read_paths=["~/.databrickscfg"],
        write_files=["~/.ssh/known_hosts"],
    )
    with trio.fail_after(20):
        async with open_sandbox(granted) as box:
            ran = await run_inside(
                box,
                "cat ~/.databrickscfg; echo host >> ~/.ssh/known_hosts; "
                "cat ~/.ssh/id_ed25519; echo x > ~/.databrickscfg",
            )
    assert "[DEFAULT]" in ran.out
    assert (home / ".ssh" / "known_hosts").read_text() == "host\n"
    assert "PRIVATE KEY" not in ran.out
    assert (home / ".databrickscfg").read_text() == "[DEFAULT]\n"


async def test_a_broad_read_grant_still_hides_its_dotfiles(world: tuple[Path, Path]) -> None:
    workspace, home = world
    with trio.fail_after(20):
        async with open_sandbox(policy(workspace, home, read_paths=["~"])) as box:
            ran = await run_inside(box, "cat ~/notes.txt; cat ~/.ssh/id_ed25519; echo x > ~/n")
    assert "home notes" in ran.out and "PRIVATE KEY" not in ran.out
    assert not (home / "n").exists()


async def test_tmp_is_private(world: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, home = world
    marker = Path("/tmp") / f"omnigent-sandbox-test-{os.getpid()}"
    marker.write_text("host tmp\n")
    try:
        with trio.fail_after(20):
            async with open_sandbox(policy(workspace, home)) as box:
                ran = await run_inside(box, f"cat {marker}; echo in > /tmp/inside; ls /tmp")
    finally:
        marker.unlink()
    assert "host tmp" not in ran.out and marker.name not in ran.out
    assert not await trio.Path("/tmp/inside").exists()


async def test_no_network_unless_allowed(world: tuple[Path, Path]) -> None:
    workspace, home = world
    fetch = "curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/x; echo rc=$?"
    with trio.fail_after(30):
        async with loopback_http() as port:
            async with open_sandbox(policy(workspace, home)) as box:
                off = await run_inside(box, fetch.format(port=port))
            async with open_sandbox(policy(workspace, home, allow_network=True)) as box:
                on = await run_inside(box, fetch.format(port=port))
    assert "hello" not in off.out and "rc=7" in off.out
    assert "hello GET /x HTTP/1.1" in on.out


async def test_egress_rules_admit_only_the_matching_request(world: tuple[Path, Path]) -> None:
    workspace, home = world
    fetch = "curl -s -m 5 {flags} http://127.0.0.1:{port}{path}; echo ---"
    with trio.fail_after(30):
        async with loopback_http() as port:
            rules = [f"GET 127.0.0.1:{port}/ok/**"]
            filtered = policy(
                workspace, home, allow_network=True, egress_rules=rules, allow_private=True
            )
            async with open_sandbox(filtered) as box:
                ran = await run_inside(
                    box,
                    "; ".join(
                        fetch.format(flags=flags, port=port, path=path)
                        for flags, path in [
                            ("", "/ok/yes"),
                            ("", "/no"),
                            ("-X POST", "/ok/yes"),
                            ("--noproxy '*'", "/ok/yes"),
                        ]
                    ),
                )
            private = policy(workspace, home, allow_network=True, egress_rules=rules)
            async with open_sandbox(private) as box:
                refused = await run_inside(box, fetch.format(flags="", port=port, path="/ok/yes"))
    answers = [part.strip() for part in ran.out.split("---")]
    assert answers[0] == "hello GET /ok/yes HTTP/1.1"
    assert "no egress rule admits GET" in answers[1]
    assert "no egress rule admits POST" in answers[2]
    assert answers[3] == ""  # around the proxy there is no network at all
    assert "private or reserved addresses" in refused.out


async def test_darwin_seatbelt_refuses_on_linux(world: tuple[Path, Path]) -> None:
    workspace, home = world
    seatbelt = SandboxPolicy.resolve(Backend.DARWIN_SEATBELT, workspace, home=home)
    with pytest.raises(omnigent.SandboxUnavailable, match="darwin_seatbelt runs only on macOS"):
        async with open_sandbox(seatbelt):
            pass


async def test_missing_or_broken_bwrap_refuses(world: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, home = world
    broken = tmp_path / "bwrap"
    said = "bwrap: No permissions to create new namespace"
    broken.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(omnigent.SandboxUnavailable, match="No permissions to create new namespace"):
        async with open_sandbox(policy(workspace, home), bwrap=str(broken)):
            pass


async def test_a_hidden_scan_past_its_cap_refuses_with_error(world: tuple[Path, Path]) -> None:
    workspace, home = world
    capped = policy(workspace, home, hidden_scan_max=2, hidden_overflow="error")
    async with open_sandbox(capped) as box:
        with pytest.raises(omnigent.SandboxUnavailable, match="cwd_hidden_scan_max_entries"):
            await box.wrap(["true"], cwd=workspace)
