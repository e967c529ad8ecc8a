# The launcher that lives in an episode's sandbox and starts its scripts, so
# that a script pays for one spawn, not for a new sandbox. It runs
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


# Every signal a script starts with at its default (Python ignores SIGPIPE
# and SIGXFSZ; the host's runner may ignore others).
DEFAULTS = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}


def start(request, out, err):
    """Starts the script (posix_spawn: a fork of this process would cost
    more than the exec); None when it cannot be, with why on its stderr."""
    argv = request["argv"]
    env = dict(os.environ)
    env.update(dict(request["env"]))
    try:
        # posix_spawn has no chdir: the launcher moves itself, it opens nothing by a relative path.
        os.chdir(request["cwd"])
        return os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, err, 2),
            ],
            setsid=True,
            setsigmask=(),
            setsigdef=DEFAULTS,
        )
    except (OSError, IndexError, KeyError, TypeError, ValueError) as error:
        os.write(err, ("mlrb: cannot run %r: %s\n" % (argv, error)).encode())
        return None


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
        # Received without close-on-exec: a script gets them as 1 and 2 only.
        os.set_inheritable(out, False)
        os.set_inheritable(err, False)
        try:
            pid = start(json.loads(message), out, err)
        finally:
            os.close(out)
            os.close(err)
        status = os.waitpid(pid, 0)[1] if pid else None
        reply = {"leftover": not sweep()}
        if status is None:
            reply["code"] = 127
        elif os.WIFSIGNALED(status):
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
        # Inherited without close-on-exec: a script must never hold it.
        conn.set_inheritable(False)
    else:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(where)
    serve(conn)


main()
