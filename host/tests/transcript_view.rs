//! `mlrb view`'s transcript of an episode, rendered by headless Chromium
//! (Debian's `chromium`): the research agent on digits against a loopback
//! model shows as a conversation with one line per tool call that opens to
//! its arguments and result, the script's output, the diff of its edit and
//! the final score with the part of the test set it scored; a model-driven
//! agent that validates shows what validate() told it. A hostile trace
//! (markup in a note, a 10 MB line, bytes that are not UTF-8, lines that
//! are not events) neither breaks the page nor injects into it.

mod common;

use std::io::Write;
use std::path::Path;

use common::chromium::{chromium, render};
use common::llm_server::{LlmServer, Reply};

const KEY: &str = "sk-mlrb-test-view-0123456789";

/// One episode of `agent` on digits, its model answering from `script`.
fn on_digits(agent: &Path, script: Vec<Reply>, dir: &Path) -> common::Finished {
    let server = LlmServer::start(script);
    let config = dir.join("mlrb.toml");
    std::fs::write(&config, server.config("openai", "")).unwrap();
    let mut command = common::run_command(
        agent,
        "digits",
        &dir.join("runs"),
        &["--config", config.to_str().unwrap(), "--json"],
    );
    command.env("MLRB_TEST_LLM_KEY", KEY);
    let finished = common::finish(command);
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    finished
}

/// The first element of `dom` that starts with `open` (up to its `close`).
fn element<'a>(dom: &'a str, open: &str, containing: &str, close: &str) -> &'a str {
    let mut from = 0;
    while let Some(start) = dom[from..].find(open).map(|i| i + from) {
        let end = dom[start..].find(close).map_or(dom.len(), |i| start + i + close.len());
        if dom[start..end].contains(containing) {
            return &dom[start..end];
        }
        from = start + open.len();
    }
    panic!("no {open}… containing {containing:?} in:\n{dom}");
}

#[test]
fn the_research_agent_episode_reads_as_a_conversation() {
    let Some(chromium) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let reference =
        std::fs::read_to_string(common::workspace_root().join("tasks/digits/scripts/reference/train.py")).unwrap();
    let finished = on_digits(
        &common::agent("research-agent"),
        vec![
            Reply::call(
                "understand_file",
                r#"{"file_name": "train.py", "things_to_look_for": "the model and how submission.csv is written"}"#,
            ),
            Reply::Text("It trains a DecisionTreeClassifier(max_depth=8) and writes submission.csv.".into()),
            Reply::call(
                "edit_script",
                r#"{"script_name": "train.py", "edit_instruction": "Replace the decision tree with an RBF SVM.", "save_name": "train.py"}"#,
            ),
            Reply::Text(format!("Here is the edited script:\n```python\n{reference}```\n")),
            Reply::call("execute_script", r#"{"script_name": "train.py"}"#),
            Reply::call(
                "final_answer",
                r#"{"final_answer": "Replaced the tree with an RBF-kernel SVM."}"#,
            ),
        ],
        tmp.path(),
    );
    let served = common::viewer::serve(&finished.dir);
    let dom = render(&chromium, &served.url);

    // The conversation: the task, the agent's first messages, the model's answers.
    assert!(
        element(&dom, "<div class=\"msg task\"", "", "</div></div>").contains("Improve the test accuracy"),
        "{dom}"
    );
    let system = element(&dom, "<div class=\"msg system\"", "research assistant", "</div></div>");
    assert!(system.contains("Research Problem"), "{system}");
    let understood = element(
        &dom,
        "<div class=\"msg assistant answer\"",
        "DecisionTreeClassifier(max_depth=8)",
        "</div></div>",
    );
    assert!(
        understood.contains("scripted-1"),
        "the answering model is named: {understood}"
    );
    // The model's call of a tool opens to its arguments.
    let asked = element(&dom, "<details class=\"toolcall\">", "edit_script", "</details>");
    assert!(
        asked.contains("edit_instruction: Replace the decision tree with an RBF SVM."),
        "{asked}"
    );
    // A tool's result goes back to the model as a message.
    let result = element(
        &dom,
        "<div class=\"msg tool\"",
        "The script has been executed",
        "</div></div>",
    );
    assert!(result.contains("result of call"), "{result}");

    // Each tool call is one closed line that opens to its arguments and result.
    let run = element(
        &dom,
        "<details class=\"call\"",
        "<b>exec.execute-script</b>",
        "</details>",
    );
    assert!(
        !run[..run.find('>').unwrap()].contains("open"),
        "closed until opened: {run}"
    );
    let summary = element(run, "<summary>", "", "</summary>");
    assert!(!summary.contains('\n') && summary.contains("exit 0"), "{summary}");
    assert!(run.contains(">arguments<") && run.contains("script: train.py"), "{run}");
    assert!(run.contains(">result<") && run.contains("exit_code: 0"), "{run}");
    // The script's output is shown under its call.
    let output = element(&dom, "<div class=\"output\">", "output of", "</pre></div>");
    assert!(
        output.contains("validation accuracy: 0.9") && output.contains("wrote submission.csv with"),
        "{output}"
    );
    // The edit's diff, inline after its step, and a link to the whole.
    let diff = element(&dom, "<div class=\"inline-diff\">", "SVC(", "</div>");
    assert!(diff.contains("train.py") && diff.contains("class=\"add\">+"), "{diff}");
    assert!(
        diff.contains("class=\"del\">-") && diff.contains("DecisionTreeClassifier"),
        "{diff}"
    );
    let href = &diff[diff.find("href=\"/").unwrap() + "href=\"/".len()..];
    let whole_link = &href[..href.find('"').unwrap()];
    assert!(whole_link.starts_with("diff?a="), "{diff}");

    // The final score says which part of the test set it was computed on.
    let score = element(&dom, "<div id=\"final\"", "", "</div>");
    assert!(
        score.contains("Final score") && score.contains("private part"),
        "{score}"
    );
    assert!(score.contains("validate() told the agent"), "{score}");
    assert!(score.contains("public part: never validated"), "{score}");
    assert!(
        dom.contains("Replaced the tree with an RBF-kernel SVM."),
        "the answer: {dom}"
    );

    // The raw data stays reachable: the steps table and the events' JSON.
    assert!(dom.contains("raw steps</a>") && dom.contains("raw JSON</a>"), "{dom}");
    let steps = render(&chromium, &format!("{}steps", served.url));
    assert!(
        steps.contains("<table id=\"steps\">") && steps.contains("exec.execute-script"),
        "{steps}"
    );
    let (status, json) = common::viewer::http_get(&format!("{}events.json", served.url));
    assert!(status.contains("200"), "{status}");
    let events: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["function"] == "execute-script")
    );
    let whole = render(
        &chromium,
        &format!("{}{}", served.url, whole_link.replace("&amp;", "&")),
    );
    assert!(whole.contains("class=\"diff\"") && whole.contains("SVC("), "{whole}");
}

#[test]
fn a_validation_shows_what_the_agent_was_told() {
    let Some(chromium) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let finished = on_digits(
        &common::agent("llm_validating"),
        vec![
            Reply::Text("Run the starter and validate its submission first.".into()),
            Reply::Text("The starter is valid; a kernel SVM would do better.".into()),
        ],
        tmp.path(),
    );
    let told = finished
        .events()
        .into_iter()
        .find(|e| e["function"] == "validate")
        .map(|e| e["result"]["told"]["ok"].clone())
        .unwrap();
    let public = told["score"].as_f64().unwrap();
    let served = common::viewer::serve(&finished.dir);
    let dom = render(&chromium, &served.url);

    let note = element(&dom, "<div class=\"msg note\"", "", "</div></div>");
    assert!(note.contains("plan: Run the starter"), "{note}");
    let validation = element(&dom, "<div class=\"validation\"", "", "</details></div>");
    assert!(validation.contains("The agent was told:"), "{validation}");
    assert!(validation.contains(&format!("score {public}")), "{validation}");
    assert!(validation.contains(told["message"].as_str().unwrap()), "{validation}");
    // The agent passed it on to its model: the conversation goes on.
    let passed = element(
        &dom,
        "<div class=\"msg user\"",
        "validate(): valid=true",
        "</div></div>",
    );
    assert!(passed.contains("train.py exited with Some(0)"), "{passed}");
    assert!(dom.contains("(and 3 earlier messages sent again)"), "{dom}");
    assert!(
        dom.contains("The starter is valid; a kernel SVM would do better."),
        "{dom}"
    );
    // The script's run added submission.csv: its diff is inline.
    let diff = element(&dom, "<div class=\"inline-diff\">", "submission.csv", "</div>");
    assert!(diff.contains("added"), "{diff}");
    // The public part's score the agent was told, beside the private final one.
    let score = element(&dom, "<div id=\"final\"", "", "</div>");
    assert!(
        score.contains("private part") && score.contains(&format!("best {public}")),
        "{score}"
    );
    assert!(score.contains("the score of the public part"), "{score}");
}

#[test]
fn a_hostile_trace_neither_breaks_nor_injects_into_the_page() {
    let (_tmp, finished) = common::run_on_hostile_task("validator", &[], &[]);
    let episode = finished.dir.clone();
    let mut trace = std::fs::OpenOptions::new()
        .append(true)
        .open(episode.join("events.jsonl"))
        .unwrap();
    let inject = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'><a href=\"javascript:x\">";
    let lines = [
        serde_json::json!({"seq": 900, "interface": "episode", "function": "note", "args": {"text": inject}}).to_string(),
        // A 10 MB result.
        serde_json::json!({"seq": 901, "interface": "workspace", "function": "read-file",
            "args": {"path": inject}, "result": {"ok": "y".repeat(10 << 20)}})
        .to_string(),
        // Markup and wrong types everywhere a page puts a field.
        serde_json::json!({"seq": inject, "step": inject, "interface": inject, "function": inject,
            "args": inject, "result": {"error": {"kind": inject, "message": inject}}, "duration_us": inject, "snapshot": 99999})
        .to_string(),
        serde_json::json!({"seq": 903, "interface": "llm", "function": "complete",
            "args": {"messages": [{"role": inject, "content": inject, "tool_calls": [{"id": inject, "name": inject, "arguments": inject}]}, {"role": "user", "content": {"x": inject}}]},
            "result": {"ok": {"text": inject, "model": inject, "tool_calls": inject}}, "llm": inject})
        .to_string(),
        serde_json::json!({"seq": 904, "interface": "episode", "function": "validate", "step": 9,
            "result": {"told": {"ok": {"score": inject, "valid": inject, "message": inject}}}})
        .to_string(),
        serde_json::json!({"seq": 905, "interface": "exec", "function": "execute-script", "args": {"script": inject},
            "result": {"ok": {"exit_code": inject, "stdout": inject, "stderr": "z".repeat(1 << 20)}}})
        .to_string(),
        "not json at all <script>alert(3)</script>".to_string(),
        "[1, 2, 3]".to_string(),
    ];
    for line in &lines {
        writeln!(trace, "{line}").unwrap();
    }
    // Bytes that are not UTF-8, in a line and on their own.
    trace
        .write_all(b"{\"seq\": 906, \"interface\": \"episode\", \"function\": \"note\", \"args\": {\"text\": \"bad \xff\xfe bytes\"}}\n\xc3\x28\n")
        .unwrap();
    writeln!(
        trace,
        "{}",
        serde_json::json!({"seq": 907, "interface": "episode", "function": "note", "args": {"text": "AFTER-THE-HOSTILE-LINES"}})
    )
    .unwrap();
    drop(trace);
    // A score record with markup in its fields too.
    std::fs::write(
        episode.join("score.json"),
        serde_json::json!({"score": inject, "valid": true, "metric": inject, "error": inject, "feedback": inject,
            "public": {"best": inject}})
        .to_string(),
    )
    .unwrap();

    let served = common::viewer::serve(&episode);
    let (status, page) = common::viewer::http_get(&served.url);
    assert!(status.contains("200"), "{status}");
    for planted in ["<script", "<img", "<a href=\"javascript"] {
        assert!(!page.contains(planted), "{planted} reached the page");
    }
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the note is shown, escaped"
    );
    assert!(page.len() < 2 << 20, "the 10 MB line is clipped: {} bytes", page.len());
    assert!(
        page.contains("3 lines of events.jsonl are not JSON"),
        "the bad lines are counted"
    );
    assert!(page.contains("AFTER-THE-HOSTILE-LINES"), "what follows is still shown");
    assert!(
        page.contains("bad \u{fffd}\u{fffd} bytes"),
        "bytes that are not UTF-8 are replaced"
    );
    // Every other view of the episode answers too, without the markup.
    for view in ["steps", "events.json", "diff?a=0&b=0"] {
        let (status, body) = common::viewer::http_get(&format!("{}{view}", served.url));
        assert!(status.contains("200"), "{view}: {status}");
        assert!(!body.contains("<script") || view == "events.json", "{view}");
    }
    let Some(chromium) = chromium() else { return };
    let dom = render(&chromium, &served.url);
    assert!(
        dom.contains("AFTER-THE-HOSTILE-LINES") && !dom.contains("<script"),
        "{dom}"
    );
    assert!(!dom.contains("<img"), "{dom}");
}
