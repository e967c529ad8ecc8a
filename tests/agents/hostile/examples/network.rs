//! Tries to reach the network from a script: a TCP listener the test opened
//! on the host's loopback (its port is in `port.txt`), and a DNS lookup.
use hostile_agents::{run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo};

struct Network;

const REACH: &str = r#"
import socket
port = int(open("port.txt").read().strip())
for host in ["127.0.0.1", "::1"]:
    try:
        s = socket.create_connection((host, port), timeout=3)
        print("connected", host)
        s.sendall(b"escaped")
    except OSError as e:
        print("no", host, type(e).__name__)
try:
    print("resolved", socket.gethostbyname("localhost.localdomain.example"))
except OSError as e:
    print("no dns", type(e).__name__)
try:
    s = socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("connected 1.1.1.1")
except OSError as e:
    print("no internet", type(e).__name__)
"#;

impl Agent for Network {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(script_report("reach", &run_python("reach.py", REACH, Some(30))))
    }
}

mlrb_sdk::register_agent!(Network);
