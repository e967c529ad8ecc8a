// A tool-calling loop in C on mlrb_sdk.h: MLAgentBench's actions offered as
// tools, a call required each turn. It carries out `list_files` itself,
// answers any other tool with a note that it does not, goes on after a
// malformed answer, and returns the `final_answer` argument as its answer.

#include <stdio.h>

#include "mlrb_sdk.h"

// What `list_files` observes: one path per line.
static char *list_files(const char *dir) {
    mlrb_agent_workspace_list_dir_entry_t entries;
    mlrb_tool_error_t failure;
    agent_string_t path = mlrb_str(dir);
    char *text = (char *)calloc(1, 4096);
    if (!mlrb_agent_workspace_list_files(&path, &entries, &failure)) {
        snprintf(text, 4096, "EnvError: %s", mlrb_tool_error_kind(&failure));
        mlrb_tool_error_free(&failure);
        return text;
    }
    size_t used = 0;
    for (size_t i = 0; i < entries.len && used < 4000; i++) {
        used += (size_t)snprintf(text + used, 4096 - used, "%.*s\n", (int)entries.ptr[i].path.len,
                                 (const char *)entries.ptr[i].path.ptr);
    }
    mlrb_agent_workspace_list_dir_entry_free(&entries);
    return text;
}

bool exports_agent_run(mlrb_task_info_t *task, agent_string_t *answer, agent_string_t *error) {
    mlrb_chat_t chat;
    mlrb_chat_init(&chat, "main");
    mlrb_chat_add(&chat, MLRB_AGENT_LLM_ROLE_SYSTEM, "You solve research problems by calling tools.");
    char problem[4096];
    snprintf(problem, sizeof problem, "%.*s", (int)task->research_problem.len,
             (const char *)task->research_problem.ptr);
    mlrb_chat_add(&chat, MLRB_AGENT_LLM_ROLE_USER, problem);
    mlrb_chat_add_mlagentbench_tools(&chat);
    mlrb_chat_require_tool(&chat);
    mlrb_chat_set_max_tokens(&chat, 500);
    for (int turn = 0; turn < 6; turn++) {
        mlrb_completion_t reply;
        mlrb_llm_error_t failure;
        if (!mlrb_chat_complete(&chat, &reply, &failure)) {
            agent_string_t message = mlrb_llm_error_message(&failure);
            const char *kind = mlrb_llm_error_kind(&failure);
            mlrb_note_printf("turn %d: %s: %.*s", turn, kind, (int)message.len, (const char *)message.ptr);
            bool again = strcmp(kind, "malformed-answer") == 0;
            mlrb_llm_error_free(&failure);
            if (again) continue;
            mlrb_chat_free(&chat);
            mlrb_set_string(error, kind);
            return false;
        }
        for (size_t i = 0; i < reply.tool_calls.len; i++) {
            const mlrb_tool_call_t *call = &reply.tool_calls.ptr[i];
            if (mlrb_tool_call_is(call, "final_answer")) {
                char *final = mlrb_tool_argument(call, "final_answer");
                mlrb_set_string(answer, final ? final : "(no final_answer argument)");
                free(final);
                mlrb_completion_free(&reply);
                mlrb_chat_free(&chat);
                return true;
            }
            char *observation;
            if (mlrb_tool_call_is(call, "list_files")) {
                char *dir = mlrb_tool_argument(call, "dir_path");
                observation = list_files(dir ? dir : ".");
                free(dir);
            } else {
                char *save_name = mlrb_tool_argument(call, "save_name");
                observation = (char *)calloc(1, 512);
                snprintf(observation, 512, "this agent does not carry out %.*s (save_name: %s)", (int)call->name.len,
                         (const char *)call->name.ptr, save_name ? save_name : "none");
                free(save_name);
            }
            mlrb_chat_add_tool_result(&chat, call, observation);
            free(observation);
        }
        mlrb_completion_free(&reply);
    }
    mlrb_chat_free(&chat);
    mlrb_set_string(error, "no final answer in six turns");
    return false;
}
