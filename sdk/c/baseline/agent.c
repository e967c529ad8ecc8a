// The baseline agent in C, the same policy as plugins/baseline (Rust) and
// plugins/baseline-py: run the task's starter train.py unchanged and submit
// whatever it produced, so its score is the task's baseline.

#include <stdio.h>

#include "mlrb_sdk.h"

bool exports_agent_run(mlrb_task_info_t *task, agent_string_t *answer, agent_string_t *error) {
    mlrb_note_printf("baseline on %.*s %.*s: running train.py unchanged", (int)task->name.len,
                     (const char *)task->name.ptr, (int)task->version.len, (const char *)task->version.ptr);
    mlrb_exec_result_t result;
    mlrb_tool_error_t failure;
    if (!mlrb_run_script("train.py", &result, &failure)) {
        agent_string_t message = mlrb_tool_error_message(&failure);
        char reason[512];
        snprintf(reason, sizeof reason, "train.py: %s: %.*s", mlrb_tool_error_kind(&failure), (int)message.len,
                 (const char *)message.ptr);
        mlrb_tool_error_free(&failure);
        mlrb_set_string(error, reason);
        return false;
    }
    char summary[128];
    if (result.termination == MLRB_AGENT_EXEC_TERMINATION_EXITED && result.exit_code.is_some &&
        result.exit_code.val == 0) {
        snprintf(summary, sizeof summary, "train.py finished");
    } else if (result.termination == MLRB_AGENT_EXEC_TERMINATION_EXITED) {
        snprintf(summary, sizeof summary, "train.py failed with exit code %d",
                 result.exit_code.is_some ? (int)result.exit_code.val : -1);
    } else {
        static const char *const endings[] = {"exited", "timed-out", "out-of-memory", "killed"};
        snprintf(summary, sizeof summary, "train.py ended: %s", endings[result.termination & 3]);
    }
    mlrb_exec_result_free(&result);
    mlrb_note(summary);
    printf("%s\n", summary);
    mlrb_set_string(answer, summary);
    return true;
}
