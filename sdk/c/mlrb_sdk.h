// mlrb_sdk.h: small helpers over the C bindings of the mlrb:agent world.
//
// `wit-bindgen c` generates agent.h/agent.c from mlrb's wit/ (`mlrb agent
// build` does this for you); this header makes the common calls one-liners
// with C strings. Everything the bindings offer stays available: see agent.h.
//
// Memory: strings the host returns (file contents, script output) are
// malloc'd by the bindings; free them with the *_free functions. The answer
// returned from exports_agent_run must be malloc'd too: use mlrb_set_string.
//
// The model: an mlrb_chat_t is a conversation with a model alias that grows
// as it goes (messages, tools, the model's calls and their results), with
// MLAgentBench's actions ready as tools (mlrb_mlagentbench_tools.h) and
// mlrb_tool_argument to read a call's arguments. A tool-calling loop:
//
//     mlrb_chat_t chat;
//     mlrb_chat_init(&chat, "main");
//     mlrb_chat_add(&chat, MLRB_AGENT_LLM_ROLE_USER, problem);
//     mlrb_chat_add_mlagentbench_tools(&chat);
//     mlrb_chat_require_tool(&chat);
//     mlrb_completion_t answer;
//     mlrb_llm_error_t error;
//     if (mlrb_chat_complete(&chat, &answer, &error)) {   // appends the model's turn
//         for (size_t i = 0; i < answer.tool_calls.len; i++) {
//             const mlrb_tool_call_t *call = &answer.tool_calls.ptr[i];
//             char *dir = mlrb_tool_argument(call, "dir_path");   // malloc'd, or NULL
//             ...
//             mlrb_chat_add_tool_result(&chat, call, observation);
//         }
//         mlrb_completion_free(&answer);
//     } else {
//         // mlrb_llm_error_kind(&error): "malformed-answer" when a call did not fit its schema
//         mlrb_llm_error_free(&error);
//     }
//     mlrb_chat_free(&chat);

#ifndef MLRB_SDK_H
#define MLRB_SDK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "mlrb_mlagentbench_tools.h"

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

// ---- The model ---------------------------------------------------------

typedef mlrb_agent_llm_completion_t mlrb_completion_t;
typedef mlrb_agent_llm_llm_error_t mlrb_llm_error_t;
typedef mlrb_agent_llm_tool_call_t mlrb_tool_call_t;

// A conversation: the request it grows. Every string in it is malloc'd.
typedef struct {
    mlrb_agent_llm_request_t request;
    size_t message_capacity, tool_capacity;
} mlrb_chat_t;

// A malloc'd copy of `len` bytes at `ptr` into `dst`.
static inline void mlrb__copy(agent_string_t *dst, const uint8_t *ptr, size_t len) {
    dst->len = len;
    dst->ptr = len ? (uint8_t *)malloc(len) : NULL;
    if (len) memcpy(dst->ptr, ptr, len);
}

// Room for one more element in a list grown by doubling.
static inline void *mlrb__grow(void *ptr, size_t len, size_t *capacity, size_t size) {
    if (len < *capacity) return ptr;
    *capacity = *capacity ? 2 * *capacity : 8;
    return realloc(ptr, *capacity * size);
}

// An empty conversation with the model alias `model` ("main", "fast", ...).
static inline void mlrb_chat_init(mlrb_chat_t *chat, const char *model) {
    memset(chat, 0, sizeof *chat);
    agent_string_dup(&chat->request.model, model);
    chat->request.tool_choice.tag = MLRB_AGENT_LLM_TOOL_CHOICE_AUTO;
}

// The next message, zeroed, appended to the conversation.
static inline mlrb_agent_llm_message_t *mlrb__next_message(mlrb_chat_t *chat, mlrb_agent_llm_role_t role) {
    mlrb_agent_llm_list_message_t *list = &chat->request.messages;
    list->ptr = (mlrb_agent_llm_message_t *)mlrb__grow(list->ptr, list->len, &chat->message_capacity, sizeof *list->ptr);
    mlrb_agent_llm_message_t *message = &list->ptr[list->len++];
    memset(message, 0, sizeof *message);
    message->role = role;
    return message;
}

// Appends a message: MLRB_AGENT_LLM_ROLE_SYSTEM, _USER or _ASSISTANT.
static inline void mlrb_chat_add(mlrb_chat_t *chat, mlrb_agent_llm_role_t role, const char *content) {
    agent_string_dup(&mlrb__next_message(chat, role)->content, content);
}

// Offers a tool: its name, what it does, and the JSON Schema of its arguments.
static inline void mlrb_chat_add_tool(mlrb_chat_t *chat, const char *name, const char *description,
                                      const char *parameters) {
    mlrb_agent_llm_list_tool_t *list = &chat->request.tools;
    list->ptr = (mlrb_agent_llm_tool_t *)mlrb__grow(list->ptr, list->len, &chat->tool_capacity, sizeof *list->ptr);
    mlrb_agent_llm_tool_t *tool = &list->ptr[list->len++];
    agent_string_dup(&tool->name, name);
    agent_string_dup(&tool->description, description);
    agent_string_dup(&tool->parameters, parameters);
}

// Offers MLAgentBench's actions (mlrb_mlagentbench_tools.h) as tools.
static inline void mlrb_chat_add_mlagentbench_tools(mlrb_chat_t *chat) {
    for (size_t i = 0; i < MLRB_MLAGENTBENCH_TOOL_COUNT; i++) {
        const mlrb_tool_def_t *tool = &mlrb_mlagentbench_tools[i];
        mlrb_chat_add_tool(chat, tool->name, tool->description, tool->parameters);
    }
}

// The model must call at least one of the tools.
static inline void mlrb_chat_require_tool(mlrb_chat_t *chat) {
    chat->request.tool_choice.tag = MLRB_AGENT_LLM_TOOL_CHOICE_REQUIRED;
}

// The most output tokens wanted (the host may cap it lower).
static inline void mlrb_chat_set_max_tokens(mlrb_chat_t *chat, uint32_t max_tokens) {
    chat->request.max_tokens.is_some = true;
    chat->request.max_tokens.val = max_tokens;
}

// Asks the model. On success `answer` holds the completion (free it with
// mlrb_completion_free) and the conversation holds the model's turn, its
// tool calls included; on failure `error` says why (mlrb_llm_error_free).
static inline bool mlrb_chat_complete(mlrb_chat_t *chat, mlrb_completion_t *answer, mlrb_llm_error_t *error) {
    if (!mlrb_agent_llm_complete(&chat->request, answer, error)) return false;
    mlrb_agent_llm_message_t *turn = mlrb__next_message(chat, MLRB_AGENT_LLM_ROLE_ASSISTANT);
    mlrb__copy(&turn->content, answer->text.ptr, answer->text.len);
    size_t calls = answer->tool_calls.len;
    turn->tool_calls.len = calls;
    turn->tool_calls.ptr = calls ? (mlrb_tool_call_t *)calloc(calls, sizeof(mlrb_tool_call_t)) : NULL;
    for (size_t i = 0; i < calls; i++) {
        const mlrb_tool_call_t *from = &answer->tool_calls.ptr[i];
        mlrb_tool_call_t *to = &turn->tool_calls.ptr[i];
        mlrb__copy(&to->id, from->id.ptr, from->id.len);
        mlrb__copy(&to->name, from->name.ptr, from->name.len);
        mlrb__copy(&to->arguments, from->arguments.ptr, from->arguments.len);
    }
    return true;
}

// Appends the result of the model's call `call`, for its next turn.
static inline void mlrb_chat_add_tool_result(mlrb_chat_t *chat, const mlrb_tool_call_t *call, const char *content) {
    mlrb_agent_llm_message_t *message = mlrb__next_message(chat, MLRB_AGENT_LLM_ROLE_TOOL);
    agent_string_dup(&message->content, content);
    message->tool_call_id.is_some = true;
    mlrb__copy(&message->tool_call_id.val, call->id.ptr, call->id.len);
}

static inline void mlrb_chat_free(mlrb_chat_t *chat) { mlrb_agent_llm_request_free(&chat->request); }

static inline void mlrb_completion_free(mlrb_completion_t *answer) { mlrb_agent_llm_completion_free(answer); }

static inline void mlrb_llm_error_free(mlrb_llm_error_t *error) { mlrb_agent_llm_llm_error_free(error); }

// The kind of an llm error, e.g. "malformed-answer".
static inline const char *mlrb_llm_error_kind(const mlrb_llm_error_t *error) {
    static const char *const kinds[] = {"budget-exhausted", "refused",     "provider",        "timeout",
                                        "invalid-request",  "unavailable", "malformed-answer"};
    return error->tag < sizeof kinds / sizeof kinds[0] ? kinds[error->tag] : "unknown";
}

// The message of an llm error (all cases carry one).
static inline agent_string_t mlrb_llm_error_message(const mlrb_llm_error_t *error) {
    return error->val.budget_exhausted;
}

// Whether the call is of the tool `name`.
static inline bool mlrb_tool_call_is(const mlrb_tool_call_t *call, const char *name) {
    return call->name.len == strlen(name) && memcmp(call->name.ptr, name, call->name.len) == 0;
}

// JSON reading, just enough for a call's arguments (an object the host has
// already checked against the tool's schema).
static inline const uint8_t *mlrb__json_space(const uint8_t *p, const uint8_t *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static inline int mlrb__hex4(const uint8_t *p, const uint8_t *end) {
    if (end - p < 4) return -1;
    int value = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

// Decodes the JSON string whose opening quote is at `p` into `out` (a
// NUL-terminated malloc'd buffer, when `out` is not NULL); the position
// after its closing quote, or NULL when it is not a well-formed string.
static inline const uint8_t *mlrb__json_string(const uint8_t *p, const uint8_t *end, char **out) {
    if (p >= end || *p != '"') return NULL;
    p++;
    // Decoded text is never longer than its encoding.
    char *text = out ? (char *)malloc((size_t)(end - p) + 1) : NULL;
    size_t n = 0;
    while (p < end && *p != '"') {
        uint32_t c = *p++;
        if (c == '\\') {
            if (p >= end) break;
            uint8_t escape = *p++;
            static const char escapes[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
            const char *simple = escape ? strchr(escapes, escape) : NULL;
            if (simple) {
                c = (uint8_t)decoded[simple - escapes];
            } else if (escape == 'u' && mlrb__hex4(p, end) >= 0) {
                c = (uint32_t)mlrb__hex4(p, end);
                p += 4;
                int low = end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? mlrb__hex4(p + 2, end) : -1;
                if (c >= 0xD800 && c < 0xDC00 && low >= 0xDC00 && low < 0xE000) {
                    c = 0x10000 + ((c - 0xD800) << 10) + ((uint32_t)low - 0xDC00);
                    p += 6;
                }
                if (text && c >= 0x80) {
                    if (c < 0x800) {
                        text[n++] = (char)(0xC0 | c >> 6);
                    } else if (c < 0x10000) {
                        text[n++] = (char)(0xE0 | c >> 12);
                        text[n++] = (char)(0x80 | (c >> 6 & 0x3F));
                    } else {
                        text[n++] = (char)(0xF0 | c >> 18);
                        text[n++] = (char)(0x80 | (c >> 12 & 0x3F));
                        text[n++] = (char)(0x80 | (c >> 6 & 0x3F));
                    }
                    text[n++] = (char)(0x80 | (c & 0x3F));
                    continue;
                }
            } else {
                break;
            }
        }
        if (text) text[n++] = (char)c;
    }
    if (p >= end || *p != '"') {
        free(text);
        return NULL;
    }
    if (text) {
        text[n] = 0;
        *out = text;
    }
    return p + 1;
}

// Skips one JSON value at `p`: the position of the `,`, `}` or `]` after
// it, or NULL.
static inline const uint8_t *mlrb__json_skip(const uint8_t *p, const uint8_t *end) {
    int depth = 0;
    while (p < end) {
        uint8_t c = *p;
        if (depth == 0 && (c == ',' || c == '}' || c == ']')) return p;
        if (c == '"') {
            p = mlrb__json_string(p, end, NULL);
            if (!p) return NULL;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        p++;
    }
    return NULL;
}

// The string argument `key` of a tool call, as a malloc'd C string (free()
// it), or NULL when the arguments have no such string.
static inline char *mlrb_tool_argument(const mlrb_tool_call_t *call, const char *key) {
    const uint8_t *p = call->arguments.ptr, *end = p + call->arguments.len;
    p = mlrb__json_space(p, end);
    if (p >= end || *p++ != '{') return NULL;
    for (;;) {
        p = mlrb__json_space(p, end);
        char *name = NULL;
        p = mlrb__json_string(p, end, &name);
        if (!p) return NULL;
        bool wanted = strcmp(name, key) == 0;
        free(name);
        p = mlrb__json_space(p, end);
        if (p >= end || *p++ != ':') return NULL;
        p = mlrb__json_space(p, end);
        if (wanted && p < end && *p == '"') {
            char *value = NULL;
            return mlrb__json_string(p, end, &value) ? value : NULL;
        }
        p = mlrb__json_skip(p, end);
        if (!p) return NULL;
        p = mlrb__json_space(p, end);
        if (p >= end || *p != ',') return NULL;
        p++;
    }
}

#endif
