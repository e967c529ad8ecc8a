// mlrb_sdk.h: small helpers over the C bindings of the mlrb:agent world.
//
// `wit-bindgen c` generates agent.h/agent.c from mlrb's wit/ (`mlrb agent
// build` does this for you); this header makes the common calls one-liners
// with C strings. Everything the bindings offer stays available: see agent.h.
//
// Memory: strings the host returns (file contents, script output) are
// malloc'd by the bindings; free them with the *_free functions. The answer
// returned from exports_agent_run must be malloc'd too: use mlrb_set_string.

#ifndef MLRB_SDK_H
#define MLRB_SDK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"

typedef agent_task_info_t mlrb_task_info_t;
typedef mlrb_agent_exec_exec_result_t mlrb_exec_result_t;
typedef mlrb_agent_types_tool_error_t mlrb_tool_error_t;

// A borrowed view of a C string, for passing to the host.
static inline agent_string_t mlrb_str(const char *s) {
    agent_string_t view = {(uint8_t *)s, strlen(s)};
    return view;
}

// Copies `s` into `dst` (malloc'd): how to return the answer or an error.
static inline void mlrb_set_string(agent_string_t *dst, const char *s) { agent_string_dup(dst, s); }

// The kind of a tool error, e.g. "permission-denied".
static inline const char *mlrb_tool_error_kind(const mlrb_tool_error_t *error) {
    static const char *const kinds[] = {"not-found", "permission-denied", "invalid-argument", "too-large",
                                        "timeout",   "budget-exhausted",  "unavailable",      "io"};
    return error->tag < sizeof kinds / sizeof kinds[0] ? kinds[error->tag] : "unknown";
}

// The message of a tool error (all cases carry one).
static inline agent_string_t mlrb_tool_error_message(const mlrb_tool_error_t *error) { return error->val.io; }

static inline void mlrb_tool_error_free(mlrb_tool_error_t *error) { mlrb_agent_types_tool_error_free(error); }

static inline void mlrb_exec_result_free(mlrb_exec_result_t *result) { mlrb_agent_exec_exec_result_free(result); }

// Appends a line to the research log (not a step).
static inline void mlrb_note(const char *text) {
    agent_string_t line = mlrb_str(text);
    mlrb_agent_episode_note(&line);
}

// mlrb_note with printf formatting (lines past 1 KiB are cut).
static inline void mlrb_note_printf(const char *format, ...) {
    char line[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    mlrb_note(line);
}

// Reads a workspace file into `contents` (free with agent_string_free).
static inline bool mlrb_read_file(const char *path, agent_string_t *contents, mlrb_tool_error_t *error) {
    agent_string_t p = mlrb_str(path);
    return mlrb_agent_workspace_read_file(&p, contents, error);
}

// Creates or replaces a workspace file.
static inline bool mlrb_write_file(const char *path, const char *contents, mlrb_tool_error_t *error) {
    agent_string_t p = mlrb_str(path), c = mlrb_str(contents);
    return mlrb_agent_workspace_write_file(&p, &c, error);
}

// Runs a workspace script without arguments, with the task's default timeout.
static inline bool mlrb_run_script(const char *script, mlrb_exec_result_t *result, mlrb_tool_error_t *error) {
    agent_string_t s = mlrb_str(script);
    agent_list_string_t no_args = {NULL, 0};
    return mlrb_agent_exec_execute_script(&s, &no_args, NULL, result, error);
}

#endif
