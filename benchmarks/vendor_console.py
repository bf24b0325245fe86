"""Fetch the console's vendored libraries from npm, or check the committed copies.

    python benchmarks/vendor_console.py          # (re)write transports/http/console/vendor/
    python benchmarks/vendor_console.py --check  # exit 1 if the committed files differ

The console (docs/console.md) uses Preact, its hooks and htm as plain ES modules, with no
build step. This script is how the copies in ``vendor/`` were made: ``npm pack`` of the
pinned versions, the three module files and each licence taken as they are, with one
edit — the hooks module imports the bare name ``"preact"``, which a browser cannot
resolve without an import map (an inline script the console's CSP forbids), so it is
pointed at the file beside it. It needs ``npm`` and the npm registry; nothing else
(the tests, CI, the server) does.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGES = {"preact": "11.2.0", "htm": "3.1.1"}
# (package, file in its tarball, name in vendor/)
FILES = [
    ("preact", "package/dist/preact.mjs", "preact.mjs"),
    ("preact", "package/hooks/dist/hooks.mjs", "hooks.mjs"),
    ("preact", "package/LICENSE", "LICENSE-preact.txt"),
    ("htm", "package/dist/htm.module.js", "htm.mjs"),
    ("htm", "package/LICENSE", "LICENSE-htm.txt"),
]
EDITS = {"hooks.mjs": [(b'from"preact"', b'from"./preact.mjs"')]}
VENDOR = Path(__file__).resolve().parent.parent / "omnigent/transports/http/console/vendor"


def fetch() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, version in PACKAGES.items():
            subprocess.run(
                ["npm", "pack", "--silent", f"{name}@{version}"],
                cwd=tmp,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            with tarfile.open(Path(tmp) / f"{name}-{version}.tgz") as tar:
                for package, member, target in FILES:
                    if package != name:
                        continue
                    extracted = tar.extractfile(member)
                    assert extracted is not None, member
                    body = extracted.read()
                    for old, new in EDITS.get(target, []):
                        assert body.count(old) == 1, (target, old)
                        body = body.replace(old, new)
                    out[target] = body
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    wanted = fetch()
    differ = []
    for name, body in sorted(wanted.items()):
        path = VENDOR / name
        digest = hashlib.sha256(body).hexdigest()[:16]
        if args.check:
            same = path.exists() and path.read_bytes() == body
            print(f"{'ok  ' if same else 'DIFF'} {name} {digest}")
            if not same:
                differ.append(name)
        else:
            path.write_bytes(body)
            print(f"wrote {name} ({len(body)} bytes, sha256 {digest}…)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
