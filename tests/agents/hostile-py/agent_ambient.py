"""Reaches for ambient authority from inside the agent itself: files,
sockets, environment variables, arguments (as tests/agents/hostile's
agent_ambient does in Rust)."""

import os
import socket
import sys

from mlrb_sdk import Agent


def attempt(name, action):
    try:
        action()
    except Exception as error:  # every refusal is the point here
        return f"{name}: refused ({type(error).__name__}: {error})"
    return f"{name}: ESCAPED"


def write_outside():
    with open("/tmp/mlrb-agent-escaped", "w") as out:
        out.write("x")


def tcp():
    with socket.create_connection(("127.0.0.1", 22), timeout=2):
        pass


def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))


class AgentAmbient(Agent):
    def run(self, task):
        report = [
            attempt("read /etc/passwd", lambda: open("/etc/passwd").read()),
            attempt("read train.py", lambda: open("train.py").read()),
            attempt("list .", lambda: os.listdir(".")),
            attempt("write /tmp/x", write_outside),
            attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
            attempt("tcp 127.0.0.1:22", tcp),
            attempt("udp bind", udp),
            f"env vars: {len(os.environ)}",
            f"args: {len(sys.argv)}",
        ]
        return "\n".join(report)


WitWorld = AgentAmbient.export()
