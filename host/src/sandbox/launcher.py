# The launcher that lives in an episode's sandbox and starts its scripts, so
# that a script pays for a fork and an exec, not for a new sandbox. It runs
# as the sandbox user under the sandbox's limits: whatever it does, a script
# could do too. The host treats what it says as a claim (exit status), keeps
# the timeout, output capture and control group on its side, and verifies
# that nothing is left after each script. See launcher.rs.
#
# argv: ("fd", N) or ("connect", PATH), then the lifetime in seconds.
# Host -> launcher: one SOCK_SEQPACKET message per script, a JSON object
# {"argv": [...], "env": [[k, v], ...], "cwd": "..."} carrying the write
# ends of the script's stdout and stderr as SCM_RIGHTS.
# Launcher -> host: {"ready": true} once, then per script
# {"code": N} or {"signal": N}, with "leftover": true when something the
# script started could not be killed.
import json
import os
import signal
import socket
import sys
import time

UID = os.getuid()
ME = os.getpid()


def alive_others():
    """Whether a process of the sandbox user other than this one and the
    namespace's init (which kill(-1) spares) is alive."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, ME):
            continue
        uid = state = None
        try:
            # status, not the directory's owner: a non-dumpable process's
            # directory belongs to root, its status names its real uid.
            with open("/proc/" + name + "/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:"):
                        state = line.split()[1]
                    elif line.startswith(b"Uid:"):
                        uid = int(line.split()[1])
                        break
        except (OSError, IndexError, ValueError):
            continue
        if uid == UID and state not in (b"Z", b"X"):
            return True
    return False


def sweep():
    """Kills whatever the script left behind; True when nothing is left."""
    for round in range(400):
        try:
            # kill(-1) spares the caller and the namespace's init.
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            # Nothing it may signal, not even a zombie, is left.
            return True
        if not alive_others():
            return True
        time.sleep(0.0002 if round < 20 else 0.005)
    return False


def start(request, out, err):
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            if fd > 2:
                os.close(fd)
        # Python ignores these; a script starts with the defaults.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        signal.alarm(0)
        env = dict(os.environ)
        env.update(dict(request["env"]))
        os.chdir(request["cwd"])
        argv = request["argv"]
        os.execvpe(argv[0], argv, env)
    except BaseException as error:  # noqa: BLE001 - the child must never return
        try:
            os.write(2, ("mlrb: cannot run %r: %s\n" % (request.get("argv"), error)).encode())
        finally:
            os._exit(127)


def serve(conn):
    conn.send(b'{"ready": true}')
    while True:
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        if not message:
            return
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            conn.send(json.dumps({"error": "a request without its two output pipes"}).encode())
            continue
        out, err = fds
        try:
            pid = start(json.loads(message), out, err)
        finally:
            os.close(out)
            os.close(err)
        _, status = os.waitpid(pid, 0)
        reply = {"leftover": not sweep()}
        if os.WIFSIGNALED(status):
            reply["signal"] = os.WTERMSIG(status)
        else:
            reply["code"] = os.waitstatus_to_exitcode(status)
        conn.send(json.dumps(reply).encode())


def main():
    how, where, lifetime = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Ends by itself once the episode's time is up, even if its host is gone.
    signal.alarm(max(lifetime, 1))
    if how == "fd":
        conn = socket.socket(fileno=int(where))
    else:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(where)
    serve(conn)


main()
