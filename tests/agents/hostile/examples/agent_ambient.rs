//! Reaches for ambient authority from inside the agent itself: files,
//! sockets, environment variables, arguments.
use mlrb_sdk::{Agent, TaskInfo};

struct AgentAmbient;

fn attempt<T, E: std::fmt::Debug>(name: &str, result: Result<T, E>) -> String {
    match result {
        Ok(_) => format!("{name}: ESCAPED"),
        Err(e) => format!("{name}: refused {e:?}"),
    }
}

impl Agent for AgentAmbient {
    fn run(_: TaskInfo) -> Result<String, String> {
        let report = [
            attempt("read /etc/passwd", std::fs::read("/etc/passwd")),
            attempt("read train.py", std::fs::read("train.py")),
            attempt("list .", std::fs::read_dir(".")),
            attempt("write /tmp/x", std::fs::write("/tmp/mlrb-agent-escaped", "x")),
            attempt("tcp 127.0.0.1:22", std::net::TcpStream::connect("127.0.0.1:22")),
            attempt("udp bind", std::net::UdpSocket::bind("0.0.0.0:0")),
            attempt("dns", std::net::ToSocketAddrs::to_socket_addrs(&("localhost", 80))),
            format!("env vars: {}", std::env::vars().count()),
            format!("args: {}", std::env::args().count()),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(AgentAmbient);
