# The sandbox's way to the episode's egress proxy: a script's network
# namespace is empty but for its loopback and the proxy's Unix socket, bound
# in by the host; this relays 127.0.0.1:3128 (HTTP_PROXY) to that socket.
# It decides nothing: the proxy on the other side checks the grant,
# resolves names and records every connection. See gateway.rs.
#
# argv: "serve" LIFETIME (a container's main process: relay, then exit),
# or "exec" ARGV... (relay from a child, and become the command). The
# launcher runs forward() on its own threads instead.
import os
import socket
import sys
import threading
import time

EGRESS_SOCKET = "/run/mlrb-egress.sock"


def _pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _relay(client):
    with client:
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(EGRESS_SOCKET)
        except OSError:
            return
        with upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def _listen():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 3128))
    server.listen(128)
    return server


def _accept(server):
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client,), daemon=True).start()


def forward(server=None):
    """Relays on threads of this process; the port is bound on return."""
    threading.Thread(target=_accept, args=(server or _listen(),), daemon=True).start()


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "serve":
    forward()
    time.sleep(max(int(sys.argv[2]), 1))
elif __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "exec":
    # Bound before the fork, so the command finds the port at once.
    listening = _listen()
    if os.fork() == 0:
        os.setsid()
        forward(listening)
        while True:
            time.sleep(3600)
    listening.close()
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as error:
        sys.stderr.write("mlrb: cannot run %r: %s\n" % (sys.argv[2:], error))
        os._exit(127)
