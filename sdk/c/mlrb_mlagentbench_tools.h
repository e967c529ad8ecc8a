// mlrb_mlagentbench_tools.h: MLAgentBench's actions as tool definitions for
// mlrb:agent's llm interface; generated from sdk/mlagentbench-tools.json
// (the file the Rust and Python SDKs read), do not edit.

#ifndef MLRB_MLAGENTBENCH_TOOLS_H
#define MLRB_MLAGENTBENCH_TOOLS_H

#include <stddef.h>

// A tool: its name for the model, MLAgentBench's action name, what it
// does, and the JSON Schema of its arguments.
typedef struct {
    const char *name;
    const char *action;
    const char *description;
    const char *parameters;
} mlrb_tool_def_t;

static const mlrb_tool_def_t mlrb_mlagentbench_tools[] = {
    {"list_files", "List Files",
     "Use this to navigate the file system.",
     "{\"additionalProperties\":false,\"properties\":{\"dir_path\":{\"description\":\"a valid relative path to a directory, such as \\\".\\\" or \\\"folder1/folder2\\\"\",\"maxLength\":200,\"type\":\"string\"}},\"required\":[\"dir_path\"],\"type\":\"object\"}"},
    {"copy_file", "Copy File",
     "Use this to copy a file to a new location with a new name.",
     "{\"additionalProperties\":false,\"properties\":{\"destination\":{\"description\":\"a valid file name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"},\"source\":{\"description\":\"a valid file name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"}},\"required\":[\"source\",\"destination\"],\"type\":\"object\"}"},
    {"undo_edit_script", "Undo Edit Script",
     "Use this to undo the last edit of the python script.",
     "{\"additionalProperties\":false,\"properties\":{\"script_name\":{\"description\":\"a valid python script name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"}},\"required\":[\"script_name\"],\"type\":\"object\"}"},
    {"execute_script", "Execute Script",
     "Use this to execute the python script. The script must already exist.",
     "{\"additionalProperties\":false,\"properties\":{\"script_name\":{\"description\":\"a valid python script name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"}},\"required\":[\"script_name\"],\"type\":\"object\"}"},
    {"final_answer", "Final Answer",
     "Use this to provide the final answer to the current task.",
     "{\"additionalProperties\":false,\"properties\":{\"final_answer\":{\"description\":\"a detailed description of the final answer\",\"maxLength\":1000,\"type\":\"string\"}},\"required\":[\"final_answer\"],\"type\":\"object\"}"},
    {"understand_file", "Understand File",
     "Use this to read the whole file and understand certain aspects. You should provide detailed description on what to look for and what should be returned. To get a better understanding of the file, you can use Inspect Script Lines action to inspect specific part of the file.",
     "{\"additionalProperties\":false,\"properties\":{\"file_name\":{\"description\":\"a valid file name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"},\"things_to_look_for\":{\"description\":\"a detailed description of what to look for and what should be returned\",\"maxLength\":500,\"type\":\"string\"}},\"required\":[\"file_name\",\"things_to_look_for\"],\"type\":\"object\"}"},
    {"inspect_script_lines", "Inspect Script Lines",
     "Use this to inspect specific part of a python script precisely, or the full content of a short script. The number of lines to display is limited to 100 lines. This is especially helpful when debugging.",
     "{\"additionalProperties\":false,\"properties\":{\"end_line_number\":{\"description\":\"a valid line number\",\"minimum\":1,\"type\":\"integer\"},\"script_name\":{\"description\":\"a valid python script name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"},\"start_line_number\":{\"description\":\"a valid line number\",\"minimum\":1,\"type\":\"integer\"}},\"required\":[\"script_name\",\"start_line_number\",\"end_line_number\"],\"type\":\"object\"}"},
    {"edit_script", "Edit Script (AI)",
     "Use this to do a relatively large but cohesive edit over a python script. Instead of editing the script directly, you should describe the edit instruction so that another AI can help you do this.",
     "{\"additionalProperties\":false,\"properties\":{\"edit_instruction\":{\"description\":\"a detailed step by step description of how to edit it\",\"maxLength\":1000,\"type\":\"string\"},\"save_name\":{\"description\":\"a valid file name with relative path to the current directory\",\"maxLength\":200,\"type\":\"string\"},\"script_name\":{\"description\":\"a valid python script name with relative path to the current directory; an empty script is created if it does not exist\",\"maxLength\":200,\"type\":\"string\"}},\"required\":[\"script_name\",\"edit_instruction\",\"save_name\"],\"type\":\"object\"}"},
    {"reflection", "Reflection",
     "Use this to look over all the past steps and reflect. You should provide detailed description on what to reflect on and what should be returned.",
     "{\"additionalProperties\":false,\"properties\":{\"things_to_reflect_on\":{\"description\":\"a detailed description of what to reflect on and what should be returned\",\"maxLength\":500,\"type\":\"string\"}},\"required\":[\"things_to_reflect_on\"],\"type\":\"object\"}"},
};

enum { MLRB_MLAGENTBENCH_TOOL_COUNT = 9 };

#endif
