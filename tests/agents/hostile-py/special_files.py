"""Makes FIFOs, a socket, odd names, deep and long paths and sparse files,
then points every tool call at them and asks for a score."""

from hostile import outcome, script_lines
from mlrb_sdk import Agent, episode, exec, workspace


class SpecialFiles(Agent):
    def run(self, task):
        report = [script_lines("make", lambda: exec.run("attacks/special_files.py"))]
        report += [
            outcome("read fifo.txt", lambda: workspace.read("fifo.txt")),
            outcome("write fifo.txt", lambda: workspace.write("fifo.txt", "x")),
            outcome("append fifo.txt", lambda: workspace.append("fifo.txt", "x")),
            outcome("inspect fifo.txt", lambda: workspace.inspect_lines("fifo.txt", 1, 2)),
            outcome("copy fifo.txt", lambda: workspace.copy("fifo.txt", "copy.txt")),
            outcome("copy onto fifo.txt", lambda: workspace.copy("train.py", "fifo.txt")),
            outcome("undo fifo.txt", lambda: workspace.undo("fifo.txt")),
            outcome("read sock.txt", lambda: workspace.read("sock.txt")),
            outcome("write sock.txt", lambda: workspace.write("sock.txt", "x")),
            outcome("run pipe.py", lambda: exec.run("pipe.py")),
            outcome("read a very long path", lambda: workspace.read("n/" * 3000)),
        ]
        workspace.copy("sparse.bin", "sparse-copy.bin")
        report.append("copy sparse.bin: Ok(())")
        workspace.write("submission.csv", "id,label\n")
        report.append(f"validate: valid={str(episode.validate().valid).lower()}")
        return "\n".join(report)


WitWorld = SpecialFiles.export()
