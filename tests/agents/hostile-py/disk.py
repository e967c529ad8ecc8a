"""Tries to fill the disk where the host does not count (a file tree more
than 256 folders deep), points inspect-lines at a 20 MiB line, and gives up
with an error message far larger than the host keeps."""

from hostile import outcome, script_lines
from mlrb_sdk import Agent, AgentError, exec, workspace


class Disk(Agent):
    def run(self, task):
        report = [
            script_lines("deep", lambda: exec.run("attacks/disk.py", ["deep"])),
            script_lines("sparse", lambda: exec.run("attacks/disk.py", ["sparse"])),
            outcome("inspect huge-line.txt", lambda: workspace.inspect_lines("huge-line.txt", 1, 1)),
            outcome("write 300 levels deep", lambda: workspace.write("d/" * 300 + "f", "x")),
        ]
        raise AgentError("\n".join(report) + "\n" + "e" * (3 << 20))


WitWorld = Disk.export()
