# The launcher that lives in an episode's sandbox and starts its scripts, so
# that a script pays for one spawn, not for a new sandbox. The host treats
# what it says as a claim (exit status), keeps the timeout, output capture
# and control group on its side, and verifies that nothing is left after
# each script. See launcher.rs.
#
# No script may reach it: under bubblewrap it is the pid namespace's init
# (pid 1: the kernel drops every signal a process of the namespace sends it,
# as it installs no handler, and its /proc entry is hidden); in a container
# it runs as root with only CAP_SETUID and CAP_SETGID, and starts scripts as
# the sandbox user, who may not signal, trace or read a root process. Either
# way it is not dumpable, so its memory, descriptors and environment are
# closed to processes of its own user (/proc/<pid>/mem, process_vm_writev,
# ptrace, pidfd_getfd all need that).
#
# argv: ("fd", N) or ("connect", PATH), the lifetime in seconds, and, when
# started as root, the sandbox user "UID:GID" scripts run as.
# Host -> launcher: one SOCK_SEQPACKET message per script, a JSON object
# {"argv": [...], "env": [[k, v], ...], "cwd": "..."} carrying the write
# ends of the script's stdout and stderr as SCM_RIGHTS.
# Launcher -> host: {"ready": true} once, then per script
# {"code": N} or {"signal": N}, with "leftover": true when something the
# script started could not be killed.
import json
import os
import select
import signal
import socket
import sys
import time

ME = os.getpid()


def harden():
    """No process of this user may read or write this one's memory,
    descriptors or environment, and no signal ends it but the host's."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
    # Python's own SIGINT handler would let a script end an init that has no other.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive_others(uid, me):
    """Whether a process of `uid` other than `me` and the namespace's init
    (which kill(-1) spares) is alive."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        owner = state = None
        try:
            # status, not the directory's owner: a non-dumpable process's
            # directory belongs to root, its status names its real uid.
            with open("/proc/" + name + "/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:"):
                        state = line.split()[1]
                    elif line.startswith(b"Uid:"):
                        owner = int(line.split()[1])
                        break
        except (OSError, IndexError, ValueError):
            continue
        if owner == uid and state not in (b"Z", b"X"):
            return True
    return False


def reap():
    """Collects the zombies of orphans (re-parented to an init launcher)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def sweep_as(uid):
    """Kills every process of `uid` but the caller; True when none is left."""
    me = os.getpid()
    for round in range(400):
        try:
            # kill(-1) spares the caller and the namespace's init.
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            # Nothing it may signal, not even a zombie, is left.
            return True
        reap()
        if not alive_others(uid, me):
            return True
        time.sleep(0.0002 if round < 20 else 0.005)
    return False


def sweep(user):
    """Kills whatever the script left behind; True when nothing is left.
    As root, a child of the sandbox user's does it, so that kill(-1) spares
    the container's own processes."""
    if user is None:
        clean = sweep_as(os.getuid())
        reap()
        return clean
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
            os._exit(0 if sweep_as(user[0]) else 1)
        finally:
            os._exit(2)
    return os.waitpid(pid, 0)[1] == 0


# Every signal a script starts with at its default (Python ignores SIGPIPE
# and SIGXFSZ; the host's runner may ignore others).
DEFAULTS = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}


def start(request, out, err, user):
    """Starts the script (posix_spawn: a fork of this process would cost
    more than the exec; as root, a fork that drops to the sandbox user);
    its pid, or None when it cannot be, with why on its stderr."""
    argv = request["argv"]
    env = dict(os.environ)
    env.update(dict(request["env"]))
    try:
        # posix_spawn has no chdir: the launcher moves itself, it opens nothing by a relative path.
        os.chdir(request["cwd"])
        if user is not None:
            return start_as(argv, env, out, err, user)
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


def start_as(argv, env, out, err, user):
    """The script as the sandbox user, from a root launcher."""
    import subprocess
    child = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
        user=user[0], group=user[1], extra_groups=[], start_new_session=True,
        close_fds=True, restore_signals=True,
    )
    # The launcher waits for it by pid; the Popen object must not reap it.
    child.returncode = 0
    return child.pid


DEADLINE = [0.0]


def wait_readable(fd):
    """Waits until `fd` is readable; ends the launcher if its lifetime is
    up first."""
    left = DEADLINE[0] - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        os._exit(0)


def wait_for(pid):
    """The wait status of the script `pid`, waited for within the lifetime."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3: unbounded
        return os.waitpid(pid, 0)[1]
    try:
        wait_readable(pidfd)
    finally:
        os.close(pidfd)
    return os.waitpid(pid, 0)[1]


def serve(conn, user):
    conn.send(b'{"ready": true}')
    while True:
        wait_readable(conn)
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
            pid = start(json.loads(message), out, err, user)
        finally:
            os.close(out)
            os.close(err)
        status = wait_for(pid) if pid else None
        reply = {"leftover": not sweep(user)}
        if status is None:
            reply["code"] = 127
        elif os.WIFSIGNALED(status):
            reply["signal"] = os.WTERMSIG(status)
        else:
            reply["code"] = os.waitstatus_to_exitcode(status)
        conn.send(json.dumps(reply).encode())


def main():
    how, where, lifetime = sys.argv[1], sys.argv[2], int(sys.argv[3])
    user = tuple(int(n) for n in sys.argv[4].split(":")) if len(sys.argv) > 4 else None
    if user is not None and os.getuid() != 0:
        sys.exit("mlrb: a launcher that starts scripts as another user must run as root")
    harden()
    # Ends by itself once the episode's time is up, even if its host is
    # gone: every wait is bounded by the deadline. No timer thread (each
    # thread is a task of the sandbox's /proc, outside the init's masked
    # /proc/1) and no SIGALRM handler (which would let a script send it).
    DEADLINE[0] = time.monotonic() + max(lifetime, 1)
    if how == "fd":
        conn = socket.socket(fileno=int(where))
        # Inherited without close-on-exec: a script must never hold it.
        conn.set_inheritable(False)
    else:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(where)
    serve(conn, user)


main()
