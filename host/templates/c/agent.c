// {{name}}: an mlrb agent in C. It starts as the baseline policy (run the
// task's train.py unchanged); make it do better.

#include <stdio.h>

#include "mlrb_sdk.h"

bool exports_agent_run(mlrb_task_info_t *task, agent_string_t *answer, agent_string_t *error) {
    mlrb_note_printf("{{name}} on %.*s", (int)task->name.len, (const char *)task->name.ptr);
    mlrb_exec_result_t result;
    mlrb_tool_error_t failure;
    if (!mlrb_run_script("train.py", &result, &failure)) {
        mlrb_set_string(error, "train.py could not run");
        mlrb_tool_error_free(&failure);
        return false;
    }
    char summary[128];
    snprintf(summary, sizeof summary, "train.py ended: termination %d, exit code %d", (int)result.termination,
             result.exit_code.is_some ? (int)result.exit_code.val : -1);
    mlrb_exec_result_free(&result);
    printf("%s\n", summary);
    mlrb_set_string(answer, summary);
    return true;
}
