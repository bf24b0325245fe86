"""The egress bridge: the only way out of a sandbox with ``egress_rules``.

Such a sandbox has a network namespace of its own, with nothing but a loopback
interface: no route anywhere. The egress proxy runs in the runtime, outside, on a
Unix socket (:mod:`._proxy`); the socket file is bound into the sandbox, and Unix
sockets cross network namespaces because they are files. Most programs speak to an
HTTP proxy over TCP (``HTTPS_PROXY=http://127.0.0.1:3128``), so inside the sandbox a
small bridge listens on ``127.0.0.1:3128`` and relays each connection to the socket.

This is the design Claude Code's sandbox-runtime (socat on both sides) and Codex's
Linux sandbox (its own helper, re-executed inside bwrap) use. Here the bridge is
:data:`LAUNCHER`, a standard-library Python script run with ``python -I -S`` (no site,
no environment: nothing of the workspace is imported). It binds the listener
*before* the command starts — so the first connection cannot race it — forks the
bridge twice (it is re-parented to the sandbox's init, so the command never sees an
unexpected child, and ``wait`` in a shell does not wait for it), and then ``exec``\\ s
the command in its own place. When the command ends, bwrap's init ends and the pid
namespace takes the bridge with it.
"""

from __future__ import annotations

__all__ = ["BRIDGE_PORT", "LAUNCHER"]

BRIDGE_PORT = 3128

LAUNCHER = r"""
import os, socket, sys, threading
path, argv = sys.argv[1], sys.argv[3:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 3128))
listener.listen(64)
slots = threading.BoundedSemaphore(64)

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def relay(client):
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        client.close()
        slots.release()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()
    slots.release()

def serve():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        slots.acquire()
        client, _ = listener.accept()
        threading.Thread(target=relay, args=(client,), daemon=True).start()

child = os.fork()
if child == 0:
    if os.fork() == 0:
        serve()
    os._exit(0)
os.waitpid(child, 0)
listener.close()
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write("%s: %s\n" % (argv[0], exc.strerror))
    os._exit(127)
"""
"""Run as ``python -I -S -c LAUNCHER SOCKET -- COMMAND…`` inside the sandbox."""
